package driver

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// sameNetwork reports why a CreateNetwork for the known network n asks for
// something else than n is, or nil when it is a retry of the request that
// created n. What counts is what the driver acts on: the parsed, validated
// options (so option order, defaults given explicitly and keys the engine
// adds and the driver ignores make no difference), the subnets (pools and
// gateways compared as networks and addresses), IPv6 and internal.
func sameNetwork(n *network, opts NetworkOptions, req CreateNetworkRequest) error {
	var stored []Option
	for k, v := range n.Options {
		stored = append(stored, Option{Key: k, Value: v})
	}
	old, err := ParseNetworkOptions(stored)
	if err != nil {
		// A record from a daemon with other option rules: compare what it
		// recorded.
		old = NetworkOptions{Parent: n.Parent, Mode: n.Mode, RDMADevice: n.RDMADevice, GIDCheck: n.GIDCheck,
			TrafficClass: optionalOf(n.TrafficClass), ServiceLevel: optionalOf(n.ServiceLevel)}
		if _, ok := n.Options[api.OptMTU]; ok {
			old.MTU = n.MTU
		}
	}
	var diff []string
	add := func(what, was, now string) {
		if was != now {
			diff = append(diff, fmt.Sprintf("%s %s (asked: %s)", what, orNone(was), orNone(now)))
		}
	}
	add(api.OptParent, old.Parent, opts.Parent)
	add(api.OptMode, old.Mode, opts.Mode)
	add(api.OptMTU, mtuText(old.MTU), mtuText(opts.MTU))
	add(api.OptRDMADevice, old.RDMADevice, opts.RDMADevice)
	add(api.OptGIDCheck, old.GIDCheck, opts.GIDCheck)
	add(api.OptTrafficClass, old.TrafficClass.String(), opts.TrafficClass.String())
	add(api.OptServiceLevel, old.ServiceLevel.String(), opts.ServiceLevel.String())
	add("IPv4 subnets", subnetText(n.IPv4), subnetText(req.IPv4))
	add("IPv6 subnets", subnetText(n.IPv6), subnetText(req.IPv6))
	add("enable_ipv6", fmt.Sprint(n.EnableIPv6), fmt.Sprint(req.EnableIPv6))
	add("internal", fmt.Sprint(n.Internal), fmt.Sprint(req.Internal))
	if len(diff) == 0 {
		return nil
	}
	return conflictf("network %s already exists with other settings: %s; remove it (docker network rm) before creating it with new ones",
		ShortID(n.ID), strings.Join(diff, ", "))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func mtuText(mtu int) string {
	if mtu == 0 {
		return "the parent's"
	}
	return fmt.Sprint(mtu)
}

// subnetText is a canonical form of subnets: each pool as its network and
// gateway as an address, sorted.
func subnetText(subnets []Subnet) string {
	var out []string
	for _, s := range subnets {
		p := s.Pool
		if _, n, err := net.ParseCIDR(s.Pool); err == nil {
			p = n.String()
		}
		if s.Gateway != "" {
			gw, _, err := net.ParseCIDR(s.Gateway)
			if err != nil {
				gw = net.ParseIP(s.Gateway)
			}
			if gw != nil {
				p += " gateway " + gw.String()
			} else {
				p += " gateway " + s.Gateway
			}
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}
