package fabric

// RoCEHeaders is what RoCE v2 takes from a netdev's MTU before its payload:
// the headers the kernel's iboe_get_mtu (include/rdma/ib_addr.h) subtracts,
// GRH 40 + UDP 8 + BTH 12 + XRC extension 4 + atomic extension 28 + ICRC 4.
const RoCEHeaders = 40 + 8 + 12 + 4 + 28 + 4

// JumboMTU is the smallest netdev MTU that gives the largest RoCE MTU, 4096.
const JumboMTU = 4096 + RoCEHeaders

// RoCEMTU returns the RoCE path MTU a netdev MTU allows, as the kernel's
// iboe_get_mtu works it out: the MTU less RoCEHeaders, rounded down to 4096,
// 2048, 1024, 512 or 256; 0 below 256.
func RoCEMTU(netdevMTU int) int {
	payload := netdevMTU - RoCEHeaders
	for _, m := range []int{4096, 2048, 1024, 512, 256} {
		if payload >= m {
			return m
		}
	}
	return 0
}
