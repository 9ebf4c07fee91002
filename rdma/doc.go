// Package rdma implements RoCEv2 framing and an InfiniBand Reliable
// Connection (RC) queue pair, as a pure sans-IO state machine.
//
// # Wire format
//
// A RoCEv2 packet over IPv4 is
//
//	Ethernet(14) | IPv4(20, DF) | UDP(8, dport 4791) | BTH(12) |
//	[RETH(16)] [AETH(4)] [ImmDt(4)] | payload | pad(0-3) | ICRC(4)
//
// The Unreliable Connection (UC) transport sends the same SEND and RDMA
// WRITE packets under opcodes 0x20 | op (OpUCSendOnly is 0x24): the encoder,
// Frame.Parse and the gopacket layers handle them like their RC twins, and
// UCPayload reads a UC SEND Only in one call. The queue pair speaks RC only.
//
// The package has two faces over the same definitions:
//
//   - zero-allocation byte-slice views (Ethernet, IPv4, UDP, BTH, RETH, AETH,
//     ImmDt, RoCE over a whole frame, Frame) and an encoder
//     (FrameHeader.Encode) for the hot path;
//   - gopacket layers (LayerTypeBTH, LayerTypeRETH, LayerTypeAETH,
//     LayerTypeImmDt), registered on UDP port 4791, with DecodingLayer and
//     SerializableLayer support, for tests, pcap decoding and tools.
//
// The ICRC is computed on send and verified on receive (ComputeICRC, SetICRC,
// CheckICRC); a queue pair drops and counts frames whose ICRC is wrong.
//
// # Reliable connection
//
// QP is a requester and a responder in one object, driven entirely by its
// caller:
//
//	inputs:  PostSend(wr), Receive(now, frame), HandleTimeout(now)
//	outputs: PollTransmit(now, buf) -> frame, NextTimeout() -> deadline,
//	         PollCompletion() -> completion
//
// It never reads a clock, starts a goroutine or uses global randomness.
// Host adapts a set of QPs to the emulator's emu.Node interface; FlushQP,
// its output half (transmit, then re-arm the QP's timer), serves nodes
// that host QPs among other state.
//
// # Tools
//
// DecodePcap prints a capture frame by frame (transport headers, a
// caller-supplied payload description, ICRC verdict) with a summary.
//
// # Wireshark
//
// tshark decodes these frames as RRoCE on UDP port 4791 by default. Its
// RPC-over-RDMA heuristic throws on RC SEND Only payloads shorter than 16
// bytes (it reads payload offset 12 before checking the length), marking them
// malformed; disable it with --disable-heuristic rpcrdma_infiniband.
package rdma
