// crescent — whole-frame parse (Ethernet -> IPv4 -> TCP) and drop reason names.
#include "stack/wire/wire.hpp"

namespace crescent::wire {

std::string_view drop_name(Drop d)
{
    switch (d) {
    case Drop::None: return "none";
    case Drop::EthTruncated: return "eth_truncated";
    case Drop::EthNotIpv4: return "eth_not_ipv4";
    case Drop::IpTruncated: return "ip_truncated";
    case Drop::IpBadVersion: return "ip_bad_version";
    case Drop::IpBadIhl: return "ip_bad_ihl";
    case Drop::IpBadTotalLength: return "ip_bad_total_length";
    case Drop::IpBadChecksum: return "ip_bad_checksum";
    case Drop::IpFragment: return "ip_fragment";
    case Drop::IpNotTcp: return "ip_not_tcp";
    case Drop::TcpTruncated: return "tcp_truncated";
    case Drop::TcpBadDataOffset: return "tcp_bad_data_offset";
    case Drop::TcpBadChecksum: return "tcp_bad_checksum";
    case Drop::TcpBadOption: return "tcp_bad_option";
    case Drop::TcpBadOptionLength: return "tcp_bad_option_length";
    case Drop::IpBadSource: return "ip_bad_source";
    case Drop::Count_: break;
    }
    return "unknown";
}

Drop parse_frame(Bytes frame, Offload off, Frame* out)
{
    if (parse_ts_frame(frame, off, out))
        return Drop::None;
    return parse_frame_general(frame, off, out);
}

Drop parse_frame_general(Bytes frame, Offload off, Frame* out)
{
    size_t ip_off = 0;
    if (Drop d = parse_eth(frame, &out->eth, &ip_off); d != Drop::None)
        return d;
    const Bytes packet = frame.subspan(ip_off);
    size_t tcp_off = 0;
    if (Drop d = parse_ipv4(packet, off.rx_ip_csum_ok, &out->ip, &tcp_off); d != Drop::None)
        return d;
    // parse_ipv4 guarantees tcp_off + payload_len <= packet.size(); what
    // follows is Ethernet padding and is not part of the segment.
    const Bytes segment = packet.subspan(tcp_off, out->ip.payload_len);
    size_t data_off = 0;
    if (Drop d = parse_tcp(segment, out->ip, off.rx_l4_csum_ok, &out->tcp, &data_off); d != Drop::None)
        return d;
    out->payload_off = ip_off + tcp_off + data_off;
    out->payload_len = segment.size() - data_off;
    return Drop::None;
}

} // namespace crescent::wire
