// star.cc: ns-3's side of the star benchmark against inabox (`make vs-ns3`,
// bench/ns3/run.sh; inabox's side is bench/ns3/gostar). N senders, each on a
// 100 Gb/s, 1 us point-to-point link to a router, which forwards (IPv4) to a
// sink over one more such link. Each sender's UdpClient sends P datagrams of
// 278 bytes (a 308-byte PPP frame: PPP 2 + IPv4 20 + UDP 8 + 278), one every
// interval (25 ns at line rate; with --paced=1, N x 25 ns); the sink's
// UdpServer counts them. Every device queue holds N*P+16 packets and the
// traffic-control layer is removed, so nothing drops. Prints one line of
// key=value pairs like gostar's: frames delivered, packet-hops (2 per
// frame), the simulated end time and the wall time of Simulator::Run alone.
#include <chrono>
#include <cstdio>
#include <string>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

using namespace ns3;

int main(int argc, char *argv[]) {
  uint32_t n = 8, p = 100000;
  bool paced = false;
  CommandLine cmd;
  cmd.AddValue("n", "senders", n);
  cmd.AddValue("p", "datagrams per sender", p);
  cmd.AddValue("paced", "send at 1/N of line rate", paced);
  cmd.Parse(argc, argv);
  if (n < 1 || p < 1) {
    std::fprintf(stderr, "star: --n and --p must be >= 1\n");
    return 2;
  }
  const std::string queue = std::to_string(n * p + 16) + "p";

  NodeContainer senders, router, sink;
  senders.Create(n);
  router.Create(1);
  sink.Create(1);
  InternetStackHelper stack;
  stack.InstallAll();

  PointToPointHelper link;
  link.SetDeviceAttribute("DataRate", StringValue("100Gbps"));
  link.SetChannelAttribute("Delay", StringValue("1us"));
  link.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue(queue));

  Ipv4AddressHelper addr;
  std::vector<NetDeviceContainer> devs;
  for (uint32_t i = 0; i < n; i++) {
    NetDeviceContainer d = link.Install(senders.Get(i), router.Get(0));
    char base[32];
    std::snprintf(base, sizeof base, "10.%u.%u.0", 1 + i / 256, i % 256);
    addr.SetBase(base, "255.255.255.0");
    addr.Assign(d);
    devs.push_back(d);
  }
  NetDeviceContainer ds = link.Install(router.Get(0), sink.Get(0));
  addr.SetBase("10.200.0.0", "255.255.255.0");
  Ipv4InterfaceContainer sinkIf = addr.Assign(ds);
  devs.push_back(ds);
  // No queue discs: the devices' drop-tail queues alone, as inabox's links.
  TrafficControlHelper tch;
  for (auto &d : devs) {
    tch.Uninstall(d);
  }
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();

  UdpServerHelper server(9);
  ApplicationContainer srv = server.Install(sink.Get(0));
  srv.Start(Seconds(0));
  UdpClientHelper client(sinkIf.GetAddress(1), 9);
  client.SetAttribute("MaxPackets", UintegerValue(p));
  client.SetAttribute("Interval", TimeValue(NanoSeconds(paced ? 25 * n : 25)));
  client.SetAttribute("PacketSize", UintegerValue(278));
  ApplicationContainer cl = client.Install(senders);
  cl.Start(Seconds(0));

  auto t0 = std::chrono::steady_clock::now();
  Simulator::Run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t got = DynamicCast<UdpServer>(srv.Get(0))->GetReceived();
  double end = Simulator::Now().GetSeconds();
  uint64_t events = Simulator::GetEventCount();
  Simulator::Destroy();
  if (got != uint64_t(n) * p) {
    std::fprintf(stderr, "star: delivered %llu of %llu\n", (unsigned long long)got, (unsigned long long)n * p);
    return 1;
  }
  std::printf("sim=ns3 n=%u p=%u paced=%s delivered=%llu hops=%llu end_s=%.9f wall_s=%.6f events=%llu\n", n, p,
              paced ? "true" : "false", (unsigned long long)got, (unsigned long long)(2 * got), end, wall,
              (unsigned long long)events);
  return 0;
}
