// crescent — the ethdev-backed engine device.
#include "stack/engine/device.hpp"

namespace crescent::engine {

DeviceCaps EthdevDevice::query_caps(uint16_t port) {
    DeviceCaps c;
    rte_eth_dev_info info;
    if (rte_eth_dev_info_get(port, &info) == 0) {
        c.multi_segs = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
        c.tx_ip_csum = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
        c.tx_tcp_csum = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_TCP_CKSUM) != 0;
        c.tso = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_TCP_TSO) != 0;
        c.max_segs = info.tx_desc_lim.nb_mtu_seg_max;
        c.max_tso_segs = info.tx_desc_lim.nb_seg_max;
        c.rx_csum = (info.rx_offload_capa & (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM)) ==
                    (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM);
    }
    uint16_t mtu = 0;
    if (rte_eth_dev_get_mtu(port, &mtu) == 0 && mtu >= 576) c.mtu = mtu;
    return c;
}

} // namespace crescent::engine
