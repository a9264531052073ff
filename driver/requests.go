package driver

import (
	"net"
	"path/filepath"
	"strings"
)

// maxSandboxKey bounds a sandbox key: it is a path (Docker's are
// /var/run/docker/netns/<id>, or under another --exec-root), so PATH_MAX.
const maxSandboxKey = 4096

// checkSandboxKey refuses a Join's sandbox key that is not the absolute,
// clean path of a network namespace file that Docker sends: it is written
// to the endpoint's record and shown in the logs.
func checkSandboxKey(key string) error {
	switch {
	case len(key) > maxSandboxKey:
		return badRequestf("sandbox key is %d bytes long, more than %d: Docker sends the path of the container's network namespace", len(key), maxSandboxKey)
	case hasControl(key) || !utf8Valid(key):
		return badRequestf("sandbox key %q has a control character or invalid UTF-8: Docker sends the path of the container's network namespace", truncate(strings.ToValidUTF8(key, "?"), 80))
	case !strings.HasPrefix(key, "/") || filepath.Clean(key) != key:
		return badRequestf("sandbox key %q is not an absolute clean path (like /var/run/docker/netns/3f2a9c81b0d4): Docker sends the path of the container's network namespace", truncate(key, 80))
	}
	return nil
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

// checkEndpointNetwork refuses a call that names endpoint e with another
// network than its own: the caller is confused about which endpoint it
// means, and acting on it could delete another network's container link.
func checkEndpointNetwork(e *endpoint, nid string) error {
	if e.NetworkID == nid {
		return nil
	}
	return badRequestf("endpoint %s belongs to network %s, not to network %q: name the endpoint's own network (docker network inspect shows it)",
		ShortID(e.ID), ShortID(e.NetworkID), ShortID(nid))
}

// checkSubnets refuses IPAM data that is not what Docker's IPAM sends: pools
// in CIDR form of the right family, gateways inside their pool.
func checkSubnets(subnets []Subnet, v6 bool) error {
	family := "IPv4"
	if v6 {
		family = "IPv6"
	}
	for _, s := range subnets {
		ip, pool, err := net.ParseCIDR(s.Pool)
		if err != nil || (ip.To4() == nil) != v6 {
			return invalidf("%s pool %q is not an %s subnet in CIDR form (like %s): check --subnet", family, truncate(s.Pool, 80), family, map[bool]string{false: "192.168.7.0/24", true: "fd00:7::/64"}[v6])
		}
		if s.Gateway == "" {
			continue
		}
		gw, _, err := net.ParseCIDR(s.Gateway)
		if err != nil {
			gw = net.ParseIP(s.Gateway)
		}
		if gw == nil || !pool.Contains(gw) {
			return invalidf("%s gateway %q is not an address in pool %s: check --gateway", family, truncate(s.Gateway, 80), s.Pool)
		}
	}
	return nil
}

// checkAddress refuses an endpoint address from IPAM ("" is none) that is not
// in CIDR form, or not of its field's family: Docker's IPAM gives the IPv4
// address in Address and the IPv6 one in AddressIPv6, and the GID entries
// admission counts, and those the watch waits for, follow the field.
func checkAddress(a string, v6 bool) error {
	if a == "" {
		return nil
	}
	if _, _, err := net.ParseCIDR(a); err != nil {
		return badRequestf("address %q from IPAM is not in CIDR form (like 192.168.7.2/24)", truncate(a, 80))
	}
	// The text tells the family: an IPv6 address always has a colon, an
	// IPv4 one never (an IPv4-mapped ::ffff:a.b.c.d is IPv6 text).
	if isV6 := strings.Contains(a, ":"); isV6 != v6 {
		field, other, want, otherField := "Address", "IPv6", "IPv4", "AddressIPv6"
		if v6 {
			field, other, want, otherField = "AddressIPv6", "IPv4", "IPv6", "Address"
		}
		return badRequestf("address %q from IPAM is an %s address in the %s field (%s): IPAM gives %s addresses in %s", truncate(a, 80), other, want, field, other, otherField)
	}
	return nil
}
