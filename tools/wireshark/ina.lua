-- ina.lua: a Wireshark dissector for inabox's INA header (docs/ina-header.md).
--
-- The INA header is the payload of a RoCEv2 message after the BTH and any
-- RETH/ImmDt. Wireshark's InfiniBand dissector hands such payloads to the
-- heuristic dissectors of "infiniband.payload"; this script registers one
-- there that claims the payload of the eight "Only" opcodes INA rides on
-- (RC/UC SEND Only 0x04/0x24, with Immediate 0x05/0x25, RDMA WRITE Only
-- 0x0A/0x2A, with Immediate 0x0B/0x2B) when it starts with the version byte
-- 0xA1. It decodes data packets (contributions, results, partials), the
-- switch's "absorbed" marker and every FreeINA control message, and flags
-- malformed headers with expert info (the checks of switch/inahdr's
-- Validate and DecodeCtl, plus a count that disagrees with the payload).
--
-- Use:   tshark -X lua_script:tools/wireshark/ina.lua -r h0-w1.0-sw2.pcap -Y ina
-- or install it for Wireshark with `make wireshark`
-- (~/.local/lib/wireshark/plugins/ina.lua). Display filters: ina.job,
-- ina.flags.result, ina.ctl.op == 2, ... (the field table below).
--
-- Preference ina.force (default off): dissect the payload of every Only
-- opcode as INA, even without the version byte, to see bad versions and
-- short headers.

local ina = Proto("ina", "In-Network Aggregation (inabox)")

-- Layout constants (switch/inahdr).
local VERSION = 0xA1
local HDR_LEN = 20
local MAX_VALUES = 1024
local MAX_WORKERS = 32

-- Flag bits, in bit order.
local FLAG_COLLISION = 0x01
local FLAG_OVERFLOW = 0x02
local FLAG_RESEND = 0x04
local FLAG_RESULT = 0x08
local FLAG_FROM_PS = 0x10
local FLAG_PARTIAL = 0x20
local FLAG_BYPASS = 0x40
local FLAG_CTL = 0x80
local CTL_FLAGS = FLAG_CTL + FLAG_BYPASS

-- Control opcodes (inahdr.CtlOp), carried in the worker byte.
local CTL_ALLOC, CTL_GRANT, CTL_FREE, CTL_JOIN, CTL_LEAVE, CTL_LEFT = 1, 2, 3, 4, 5, 6
local CTL_BEGIN, CTL_PLAN, CTL_FETCH, CTL_PULL, CTL_DONE = 16, 17, 18, 19, 20
local ctl_names = {
    [CTL_ALLOC] = "ALLOC", [CTL_GRANT] = "GRANT", [CTL_FREE] = "FREE",
    [CTL_JOIN] = "JOIN", [CTL_LEAVE] = "LEAVE", [CTL_LEFT] = "LEFT",
    [CTL_BEGIN] = "BEGIN", [CTL_PLAN] = "PLAN", [CTL_FETCH] = "FETCH",
    [CTL_PULL] = "PULL", [CTL_DONE] = "DONE",
}
local CTL_EXACT = 1

-- The BTH opcodes whose payload may be an INA header.
local ina_opcodes = {
    [0x04] = true, [0x05] = true, [0x0A] = true, [0x0B] = true, -- RC
    [0x24] = true, [0x25] = true, [0x2A] = true, [0x2B] = true, -- UC
}

-- The field table: every field of the protocol, by its filter name.
local f = {
    version = ProtoField.uint8("ina.version", "Version", base.HEX),
    flags = ProtoField.uint8("ina.flags", "Flags", base.HEX),
    flag_collision = ProtoField.bool("ina.flags.collision", "Collision", 8, nil, FLAG_COLLISION,
        "the switch had no aggregator: forwarded unaggregated to the PS"),
    flag_overflow = ProtoField.bool("ina.flags.overflow", "Overflow", 8, nil, FLAG_OVERFLOW,
        "on an aggregate: a saturating add clipped; on a contribution: do not aggregate (ATP)"),
    flag_resend = ProtoField.bool("ina.flags.resend", "Resend", 8, nil, FLAG_RESEND,
        "a host retransmission after a timeout"),
    flag_result = ProtoField.bool("ina.flags.result", "Result", 8, nil, FLAG_RESULT,
        "carries an aggregate (from the PS: the ACK that releases the aggregator)"),
    flag_from_ps = ProtoField.bool("ina.flags.from_ps", "From PS", 8, nil, FLAG_FROM_PS,
        "sent by the parameter server"),
    flag_partial = ProtoField.bool("ina.flags.partial", "Partial", 8, nil, FLAG_PARTIAL,
        "a preempted partial aggregate, contributors in the bitmap"),
    flag_bypass = ProtoField.bool("ina.flags.bypass", "Bypass", 8, nil, FLAG_BYPASS,
        "RC path: the switch forwards it untouched"),
    flag_ctl = ProtoField.bool("ina.flags.ctl", "Ctl", 8, nil, FLAG_CTL,
        "FreeINA metadata: with Bypass a control message, alone the absorbed marker"),
    job = ProtoField.uint16("ina.job", "Job ID", base.DEC),
    allreduce = ProtoField.uint16("ina.allreduce", "All-reduce ID", base.DEC),
    count = ProtoField.uint16("ina.count", "Value count", base.DEC),
    chunk = ProtoField.uint32("ina.chunk", "Chunk index", base.DEC),
    worker = ProtoField.uint8("ina.worker", "Worker ID", base.DEC),
    exponent = ProtoField.int8("ina.exponent", "Exponent", base.DEC),
    slot = ProtoField.uint16("ina.slot", "Slot", base.DEC),
    bitmap = ProtoField.uint32("ina.bitmap", "Worker bitmap", base.HEX),
    values = ProtoField.bytes("ina.values", "Values"),
    value = ProtoField.int32("ina.value", "Value", base.DEC),
    kind = ProtoField.string("ina.kind", "Kind", base.ASCII,
        "data, absorbed or control (generated)"),
    -- Control messages: the opcode (worker byte) and the fields it uses.
    ctl_op = ProtoField.uint8("ina.ctl.op", "Control opcode", base.DEC, ctl_names),
    ctl_chunks = ProtoField.uint32("ina.ctl.chunks", "Chunks", base.DEC, nil, nil,
        "chunks in the all-reduce (bitmap field)"),
    ctl_want = ProtoField.uint16("ina.ctl.want", "Want", base.DEC, nil, nil,
        "aggregators wanted, 0 = as many as chunks; JOIN: the pool asked for (slot field)"),
    ctl_exact = ProtoField.bool("ina.ctl.exact", "Exact", base.NONE, nil, nil,
        "exactly Want aggregators or none (exponent byte = 1)"),
    ctl_slots = ProtoField.uint16("ina.ctl.slots", "Slots", base.DEC, nil, nil,
        "aggregators granted (GRANT) or INA chunks per round (PLAN) (slot field)"),
    ctl_base = ProtoField.uint32("ina.ctl.base", "Base", base.DEC, nil, nil,
        "first aggregator slot of the lease (chunk field)"),
    ctl_ps_chunks = ProtoField.uint32("ina.ctl.ps_chunks", "PS chunks", base.DEC, nil, nil,
        "PS-path chunks per round (chunk field)"),
    ctl_chunk = ProtoField.uint32("ina.ctl.chunk", "Chunk", base.DEC, nil, nil,
        "the chunk wanted (FETCH) or to resend raw (PULL) (chunk field)"),
    ctl_rank = ProtoField.uint32("ina.ctl.rank", "Rank", base.DEC, nil, nil,
        "the sending worker's rank in its job (JOIN, LEAVE) (chunk field)"),
    ctl_unused = ProtoField.bytes("ina.ctl.unused", "Unused",
        base.NONE, "a field this opcode does not use (written 0, ignored)"),
}
ina.fields = f

-- Expert info: one entry per way a header can be malformed.
local e = {
    short = ProtoExpert.new("ina.short", "INA header shorter than 20 bytes",
        expert.group.MALFORMED, expert.severity.ERROR),
    version = ProtoExpert.new("ina.version.bad", "Bad INA version (want 0xA1)",
        expert.group.MALFORMED, expert.severity.ERROR),
    count = ProtoExpert.new("ina.count.bad", "Value count zero or above 1024",
        expert.group.MALFORMED, expert.severity.ERROR),
    length = ProtoExpert.new("ina.count.length", "Value count inconsistent with the payload length",
        expert.group.MALFORMED, expert.severity.ERROR),
    job = ProtoExpert.new("ina.job.zero", "Job ID 0 is reserved",
        expert.group.MALFORMED, expert.severity.ERROR),
    worker = ProtoExpert.new("ina.worker.range", "Worker ID out of range (0..31) on a packet not from the PS",
        expert.group.MALFORMED, expert.severity.ERROR),
    ctl_op = ProtoExpert.new("ina.ctl.op.unknown", "Unknown control opcode",
        expert.group.MALFORMED, expert.severity.ERROR),
    ctl_count = ProtoExpert.new("ina.ctl.count", "Control message with a value count (ignored)",
        expert.group.PROTOCOL, expert.severity.WARN),
}
ina.experts = e

ina.prefs.force = Pref.bool("Dissect every Only payload as INA", false,
    "Claim the payload of every SEND/WRITE Only opcode, even without the 0xA1 version byte")

-- Fields of the dissectors below: the opcode says whether the payload may
-- be INA, the pad count and the UDP length how long it is.
local bth_opcode = Field.new("infiniband.bth.opcode")
local bth_padcnt = Field.new("infiniband.bth.padcnt")
local udp_length = Field.new("udp.length")

-- flag_names renders the flags byte as "result,from-ps" (decode's names).
local flag_list = {
    { FLAG_COLLISION, "collision" }, { FLAG_OVERFLOW, "overflow" }, { FLAG_RESEND, "resend" },
    { FLAG_RESULT, "result" }, { FLAG_FROM_PS, "from-ps" }, { FLAG_PARTIAL, "partial" },
    { FLAG_BYPASS, "bypass" }, { FLAG_CTL, "ctl" },
}
local function flag_names(v)
    local out = {}
    for _, fl in ipairs(flag_list) do
        if bit.band(v, fl[1]) ~= 0 then out[#out + 1] = fl[2] end
    end
    return table.concat(out, ",")
end

-- add_flags adds the flags byte and one boolean per bit.
local function add_flags(tree, r)
    local ft = tree:add(f.flags, r)
    ft:append_text(" [" .. flag_names(r:uint()) .. "]")
    for _, k in ipairs({ "flag_collision", "flag_overflow", "flag_resend", "flag_result",
        "flag_from_ps", "flag_partial", "flag_bypass", "flag_ctl" }) do
        ft:add(f[k], r)
    end
end

-- The header fields a control message re-uses, in wire order: name,
-- offset, length (the worker byte at 12 holds the opcode).
local ctl_wire = { { "chunk", 8, 4 }, { "opcode", 12, 1 }, { "exponent", 13, 1 }, { "slot", 14, 2 }, { "bitmap", 16, 4 } }

-- ctl_uses[op] maps each header field to the control field it carries for
-- op, as inahdr.DecodeCtl reads it; a field not named is unused.
local ctl_uses = {
    [CTL_ALLOC] = { exponent = "ctl_exact", slot = "ctl_want", bitmap = "ctl_chunks" },
    [CTL_GRANT] = { chunk = "ctl_base", slot = "ctl_slots", bitmap = "ctl_chunks" },
    [CTL_FREE] = {},
    [CTL_JOIN] = { chunk = "ctl_rank", slot = "ctl_want" },
    [CTL_LEAVE] = { chunk = "ctl_rank" },
    [CTL_LEFT] = {},
    [CTL_BEGIN] = { slot = "ctl_want", bitmap = "ctl_chunks" },
    [CTL_PLAN] = { chunk = "ctl_ps_chunks", slot = "ctl_slots", bitmap = "ctl_chunks" },
    [CTL_FETCH] = { chunk = "ctl_chunk" },
    [CTL_PULL] = { chunk = "ctl_chunk" },
    [CTL_DONE] = {},
}

-- dissect_ctl adds a control message's opcode and fields (bytes 8..19)
-- and returns the info text, as inahdr's Ctl.String renders it.
local function dissect_ctl(tvb, tree, job, ar)
    local op = tvb(12, 1):uint()
    local uses = ctl_uses[op] or {}
    local val = {} -- control field -> value
    for _, w in ipairs(ctl_wire) do
        local k, r = w[1], tvb(w[2], w[3])
        if k == "opcode" then
            local opi = tree:add(f.ctl_op, r)
            if not ctl_uses[op] then
                opi:add_proto_expert_info(e.ctl_op, string.format("Unknown control opcode %d", op))
            end
        elseif uses[k] == "ctl_exact" then
            val.ctl_exact = r:uint() == CTL_EXACT
            tree:add(f.ctl_exact, r, val.ctl_exact)
        elseif uses[k] then
            val[uses[k]] = r:uint()
            tree:add(f[uses[k]], r)
        else
            tree:add(f.ctl_unused, r)
        end
    end
    local info = string.format("%s job=%d allreduce=%d", ctl_names[op] or string.format("CtlOp(%d)", op), job, ar)
    if op == CTL_ALLOC or op == CTL_BEGIN then
        info = info .. string.format(" chunks=%d want=%d", val.ctl_chunks, val.ctl_want)
        if val.ctl_exact then info = info .. " exact" end
    elseif op == CTL_GRANT then
        info = info .. string.format(" chunks=%d slots=%d base=%d", val.ctl_chunks, val.ctl_slots, val.ctl_base)
    elseif op == CTL_PLAN then
        info = info .. string.format(" chunks=%d slots=%d ps-chunks=%d", val.ctl_chunks, val.ctl_slots, val.ctl_ps_chunks)
    elseif op == CTL_FETCH or op == CTL_PULL then
        info = info .. string.format(" chunk=%d", val.ctl_chunk)
    elseif op == CTL_JOIN then
        info = info .. string.format(" rank=%d want=%d", val.ctl_rank, val.ctl_want)
    elseif op == CTL_LEAVE then
        info = info .. string.format(" rank=%d", val.ctl_rank)
    end
    return info
end

-- append_info appends text to the Info column (InfiniBand's "UC Send Only
-- QP=0x..."), one space between.
local function append_info(pinfo, text)
    local cur = tostring(pinfo.cols.info)
    if cur ~= "" and cur:sub(-1) ~= " " then text = " " .. text end
    pinfo.cols.info:append(text)
end

-- dissect_ina dissects tvb as an INA header with its values and returns
-- the bytes it consumed.
local function dissect_ina(tvb, pinfo, root)
    local n = tvb:reported_length_remaining()
    pinfo.cols.protocol = "INA"
    local tree = root:add(ina, tvb())
    if n < HDR_LEN then
        tree:add_proto_expert_info(e.short, string.format("INA header truncated: %d of 20 bytes", n))
        if n >= 1 then tree:add(f.version, tvb(0, 1)) end
        append_info(pinfo, "INA (truncated)")
        return n
    end
    local ver = tvb(0, 1):uint()
    local vi = tree:add(f.version, tvb(0, 1))
    if ver ~= VERSION then
        vi:add_proto_expert_info(e.version, string.format("Bad INA version 0x%02x (want 0xA1)", ver))
    end
    local flags = tvb(1, 1):uint()
    add_flags(tree, tvb(1, 1))
    local job = tvb(2, 2):uint()
    local ji = tree:add(f.job, tvb(2, 2))
    local ar = tvb(4, 2):uint()
    tree:add(f.allreduce, tvb(4, 2))
    local count = tvb(6, 2):uint()
    local ci = tree:add(f.count, tvb(6, 2))
    local is_ctl = bit.band(flags, CTL_FLAGS) == CTL_FLAGS
    local is_absorbed = bit.band(flags, CTL_FLAGS) == FLAG_CTL and count == 0
    local info
    if is_ctl then
        tree:add(f.kind, "control"):set_generated()
        info = "INA " .. dissect_ctl(tvb, tree, job, ar)
        if count ~= 0 then
            ci:add_proto_expert_info(e.ctl_count, string.format("Control message with count %d (ignored)", count))
        end
    else
        tree:add(f.kind, is_absorbed and "absorbed" or "data"):set_generated()
        local chunk, worker, bitmap = tvb(8, 4):uint(), tvb(12, 1):uint(), tvb(16, 4):uint()
        tree:add(f.chunk, tvb(8, 4))
        local wi = tree:add(f.worker, tvb(12, 1))
        tree:add(f.exponent, tvb(13, 1))
        tree:add(f.slot, tvb(14, 2))
        tree:add(f.bitmap, tvb(16, 4))
        -- The checks of inahdr's Header.Validate (an absorbed marker has count 0).
        if not is_absorbed and (count == 0 or count > MAX_VALUES) then
            ci:add_proto_expert_info(e.count, string.format("Value count %d: must be 1..1024", count))
        end
        if job == 0 then ji:add_proto_expert_info(e.job) end
        if worker >= MAX_WORKERS and bit.band(flags, FLAG_FROM_PS) == 0 then
            wi:add_proto_expert_info(e.worker, string.format("Worker ID %d out of range (0..31)", worker))
        end
        info = string.format("INA %sjob=%d allreduce=%d chunk=%d worker=%d bitmap=0x%x count=%d [%s]",
            is_absorbed and "absorbed " or "", job, ar, chunk, worker, bitmap, count, flag_names(flags))
    end
    -- The values, and the length check: the payload is the header and
    -- exactly count values.
    local want = HDR_LEN + 4 * count
    if is_ctl then want = HDR_LEN end
    -- (values beyond a capture's snapshot length are not shown)
    local nvals = math.floor(math.max(math.min(math.min(n, tvb:len()) - HDR_LEN, 4 * count), 0) / 4)
    if nvals > 0 and not is_ctl then
        local vt = tree:add(f.values, tvb(HDR_LEN, 4 * nvals))
        vt:set_text(string.format("Values (%d)", nvals))
        local fv, add = f.value, vt.add -- the hot loop: no lookups
        for off = HDR_LEN, HDR_LEN + 4 * (nvals - 1), 4 do
            add(vt, fv, tvb(off, 4))
        end
    end
    if n ~= want then
        ci:add_proto_expert_info(e.length, string.format(
            "Value count %d makes %d bytes with the header, the payload has %d", count, want, n))
    end
    tree:set_len(math.min(n, math.max(want, HDR_LEN)))
    tree:append_text(", " .. info:sub(5))
    append_info(pinfo, info)
    return n
end

-- Extension header lengths of the INA opcodes: RETH (16) on RDMA WRITE,
-- ImmDt (4) on "with Immediate".
local ext_len = {
    [0x04] = 0, [0x05] = 4, [0x0A] = 16, [0x0B] = 20,
    [0x24] = 0, [0x25] = 4, [0x2A] = 16, [0x2B] = 20,
}

-- payload_len returns the length of the message payload in tvb, without
-- the BTH pad that Wireshark 4.0's InfiniBand dissector leaves in it: from
-- the UDP length where it is consistent (RoCEv2: UDP, BTH, extension
-- headers, payload, pad, ICRC), else the tvb less the pad.
local function payload_len(tvb, op)
    local pads, udps = { bth_padcnt() }, { udp_length() }
    local pad = #pads > 0 and pads[#pads].value or 0
    local have = tvb:reported_length_remaining()
    if #udps > 0 then
        local n = udps[#udps].value - 8 - 12 - ext_len[op] - pad - 4
        if n >= 0 and n <= have then return n end
    end
    return math.max(have - pad, 0)
end

-- heuristic: claim the payload of an INA-capable opcode that starts with
-- the INA version byte (every payload of one with ina.force).
local function heuristic(tvb, pinfo, root)
    local ops = { bth_opcode() }
    local op = #ops > 0 and ops[#ops].value
    if not op or not ina_opcodes[op] then return false end
    local n = payload_len(tvb, op)
    if n == 0 then return false end
    if not ina.prefs.force and (n < HDR_LEN or tvb:len() < HDR_LEN or tvb(0, 1):uint() ~= VERSION) then
        return false
    end
    dissect_ina(tvb(0, n):tvb(), pinfo, root)
    return true
end

ina.dissector = function(tvb, pinfo, root) return dissect_ina(tvb, pinfo, root) end
ina:register_heuristic("infiniband.payload", heuristic)
