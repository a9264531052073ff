package driver

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Option names (contract: same names and meaning as Docker's built-in macvlan
// driver where they overlap).
const (
	OptParent     = "parent"
	OptMode       = "macvlan_mode"
	OptMTU        = "mtu"
	OptRDMADevice = "rdma_device"
	OptGIDCheck   = "gid_check"
	// OptAddressCheck: probe each container's addresses on the parent's
	// segment for another host holding them (see addrcheck.go).
	OptAddressCheck = "address_check"
	// OptTrafficClass and OptServiceLevel are the QoS every workload on the
	// network is told to send RoCE with (see TrafficClassMax).
	OptTrafficClass = "traffic_class"
	OptServiceLevel = "service_level"
)

// Ranges of the QoS options: the traffic class is the IP ToS byte RoCE v2
// packets carry (DSCP in its upper six bits, ECN in the lower two), as
// NCCL_IB_TC and UCX_IB_TRAFFIC_CLASS take it; the service level is the
// 802.1p priority (PCP) of a VLAN-tagged frame, as NCCL_IB_SL and UCX_IB_SL
// take it.
const (
	TrafficClassMax = 255
	ServiceLevelMax = 7
)

// gid_check values: warn logs a container whose GID entries do not appear in
// time; strict fails its start (see ProgramExternalConnectivity).
const (
	GIDCheckWarn   = "warn"
	GIDCheckStrict = "strict"
)

// address_check values: warn probes after the start and reports a
// duplicate; strict probes before Join answers and refuses the start; off
// sends no probe.
const (
	AddressCheckWarn   = "warn"
	AddressCheckStrict = "strict"
	AddressCheckOff    = "off"
)

// Macvlan modes, as Docker's built-in macvlan driver names them.
const (
	ModeBridge   = "bridge"
	ModePrivate  = "private"
	ModeVEPA     = "vepa"
	ModePassthru = "passthru"
)

var (
	networkOptionNames  = []string{OptParent, OptMode, OptMTU, OptRDMADevice, OptGIDCheck, OptAddressCheck, OptTrafficClass, OptServiceLevel}
	endpointOptionNames = []string{OptMTU}
	macvlanModeNames    = []string{ModeBridge, ModePrivate, ModeVEPA, ModePassthru}
)

// Limits on what the driver accepts.
const (
	maxOptionValue = 256
	minMTU         = 68   // IPv4 minimum (RFC 791)
	minMTUIPv6     = 1280 // IPv6 minimum (RFC 8200)
	maxMTU         = 65535
	maxVLANID      = 4094
)

// Option is one key=value pair as the client sent it. Requests keep options as
// a list, not a map, so that duplicate keys can be refused instead of one
// silently winning.
type Option struct {
	Key   string
	Value string
}

// NetworkOptions are the validated `docker network create -o` options.
type NetworkOptions struct {
	Parent     string
	Mode       string
	MTU        int // 0: the parent's MTU
	RDMADevice string
	GIDCheck   string // GIDCheckWarn (default) or GIDCheckStrict
	// AddressCheck is AddressCheckWarn (default), AddressCheckStrict or
	// AddressCheckOff.
	AddressCheck string
	// TrafficClass and ServiceLevel are what workloads on the network are
	// told to send RoCE with; unset when not given.
	TrafficClass Optional
	ServiceLevel Optional
}

// Optional is a number option that may be left out.
type Optional struct {
	N   int
	Set bool
}

// Ptr is the value as the persisted record and the status carry it: nil
// when unset.
func (o Optional) Ptr() *int {
	if !o.Set {
		return nil
	}
	n := o.N
	return &n
}

// optionalOf is Ptr's inverse.
func optionalOf(p *int) Optional {
	if p == nil {
		return Optional{}
	}
	return Optional{N: *p, Set: true}
}

func (o Optional) String() string {
	if !o.Set {
		return ""
	}
	return strconv.Itoa(o.N)
}

// EndpointOptions are the validated per-container
// `--network name=N,driver-opt=k=v` options.
type EndpointOptions struct {
	MTU int // 0: the network's MTU
}

// EngineOptionPrefix starts the keys the engine itself puts among a network's
// generic options: com.docker.network.enable_ipv4 and enable_ipv6 (Docker
// 28+), com.docker.network.advertise_addr_nmsgs and _ms, daemon.json's
// default-network-opts, and compose users' com.docker.network.driver.mtu.
// The built-in macvlan ignores the ones it does not know; so does this driver.
const EngineOptionPrefix = "com.docker.network."

// OptEngineMTU is the engine's generic MTU option; it means what -o mtu means.
const OptEngineMTU = EngineOptionPrefix + "driver.mtu"

// OptEndpointIfname is the engine's per-endpoint option naming the
// container's interface (compose's interface_name).
const OptEndpointIfname = EngineOptionPrefix + "endpoint.ifname"

// ParseNetworkOptions validates the options of `docker network create -o`.
// Engine keys (EngineOptionPrefix) are ignored, except OptEngineMTU.
func ParseNetworkOptions(opts []Option) (NetworkOptions, error) {
	var out NetworkOptions
	own, err := withoutEngineOptions(opts)
	if err != nil {
		return out, err
	}
	kv, err := checkOptions(own, networkOptionNames, "docker network create -o")
	if err != nil {
		return out, err
	}
	for _, o := range kv {
		switch o.Key {
		case OptParent:
			if err := checkIfname("parent", o.Value); err != nil {
				return out, err
			}
			out.Parent = o.Value
		case OptMode:
			if !slices.Contains(macvlanModeNames, o.Value) {
				return out, invalidf("option %s=%q is not a macvlan mode: use one of %s (default %s)",
					OptMode, o.Value, strings.Join(macvlanModeNames, ", "), ModeBridge)
			}
			out.Mode = o.Value
		case OptMTU:
			mtu, err := parseMTU(o.Value)
			if err != nil {
				return out, err
			}
			out.MTU = mtu
		case OptRDMADevice:
			if !rdmaDeviceRE.MatchString(o.Value) {
				return out, invalidf("option %s=%q is not an RDMA device name (like mlx5_0 or rxe0; list them with: rdma link show)",
					OptRDMADevice, o.Value)
			}
			out.RDMADevice = o.Value
		case OptGIDCheck:
			if o.Value != GIDCheckWarn && o.Value != GIDCheckStrict {
				return out, invalidf("option %s=%q: use %s (log a container whose RDMA is not ready) or %s (fail its start)",
					OptGIDCheck, o.Value, GIDCheckWarn, GIDCheckStrict)
			}
			out.GIDCheck = o.Value
		case OptAddressCheck:
			if o.Value != AddressCheckWarn && o.Value != AddressCheckStrict && o.Value != AddressCheckOff {
				return out, invalidf("option %s=%q: use %s (probe each container's addresses on the parent's segment after its start and report another host holding them), %s (probe before the start, about 0.4 s, and refuse it on a duplicate) or %s (send no probe)",
					OptAddressCheck, o.Value, AddressCheckWarn, AddressCheckStrict, AddressCheckOff)
			}
			out.AddressCheck = o.Value
		case OptTrafficClass:
			n, err := parseLevel(o.Key, o.Value, TrafficClassMax,
				"the IP ToS byte RoCE v2 packets carry, as NCCL_IB_TC takes it: DSCP times 4 plus the ECN bits, e.g. 104 for DSCP 26, 106 for DSCP 26 with ECT(0)")
			if err != nil {
				return out, err
			}
			out.TrafficClass = Optional{N: n, Set: true}
		case OptServiceLevel:
			n, err := parseLevel(o.Key, o.Value, ServiceLevelMax,
				"the 802.1p priority of VLAN-tagged RoCE frames, as NCCL_IB_SL takes it")
			if err != nil {
				return out, err
			}
			out.ServiceLevel = Optional{N: n, Set: true}
		}
	}
	if out.Parent == "" {
		return out, invalidf("option %s is required: the RoCE netdev the containers' macvlan links hang off, e.g. -o %s=ens2f0 (or ens2f0.10 for VLAN 10)",
			OptParent, OptParent)
	}
	if out.Mode == "" {
		out.Mode = ModeBridge
	}
	if out.GIDCheck == "" {
		out.GIDCheck = GIDCheckWarn
	}
	if out.AddressCheck == "" {
		out.AddressCheck = AddressCheckWarn
	}
	return out, nil
}

// withoutEngineOptions drops the engine's own keys from opts, turning
// OptEngineMTU into OptMTU. Both MTU keys may be given only with one value.
func withoutEngineOptions(opts []Option) ([]Option, error) {
	own := make([]Option, 0, len(opts))
	var engineMTU *Option
	for _, o := range opts {
		switch {
		case o.Key == OptEngineMTU:
			if engineMTU != nil {
				return nil, invalidf("option %s is given more than once: give it once", OptEngineMTU)
			}
			engineMTU = &Option{Key: OptMTU, Value: o.Value}
		case strings.HasPrefix(o.Key, EngineOptionPrefix):
			// The engine's own: nothing for a macvlan driver to do.
		default:
			own = append(own, o)
		}
	}
	if engineMTU == nil {
		return own, nil
	}
	for _, o := range own {
		if o.Key == OptMTU {
			if o.Value != engineMTU.Value {
				return nil, invalidf("options %s=%q and %s=%q disagree: give one of them", OptMTU, o.Value, OptEngineMTU, engineMTU.Value)
			}
			return own, nil
		}
	}
	return append(own, *engineMTU), nil
}

// ParseEndpointOptions validates per-container driver options. Keys in the
// com.docker. namespace are libnetwork's own labels and are skipped.
func ParseEndpointOptions(opts []Option) (EndpointOptions, error) {
	var out EndpointOptions
	own := make([]Option, 0, len(opts))
	for _, o := range opts {
		if !IsLibnetworkLabel(o.Key) {
			own = append(own, o)
		}
	}
	for _, o := range own {
		if slices.Contains(networkOptionNames, o.Key) && !slices.Contains(endpointOptionNames, o.Key) {
			return out, invalidf("option %s applies to the whole network, not to one container: set it with docker network create -o %s=...",
				o.Key, o.Key)
		}
	}
	kv, err := checkOptions(own, endpointOptionNames, "--network name=NET,driver-opt")
	if err != nil {
		return out, err
	}
	for _, o := range kv {
		if o.Key == OptMTU {
			mtu, err := parseMTU(o.Value)
			if err != nil {
				return out, err
			}
			out.MTU = mtu
		}
	}
	return out, nil
}

// IsLibnetworkLabel reports whether key is one of libnetwork's own endpoint
// labels (exposed ports, port maps, ...) rather than a user's driver-opt.
func IsLibnetworkLabel(key string) bool {
	return strings.HasPrefix(key, "com.docker.") || strings.HasPrefix(key, "io.docker.")
}

// checkOptions refuses unknown and duplicate keys and values that are empty,
// too long or hold control characters.
func checkOptions(opts []Option, valid []string, how string) ([]Option, error) {
	seen := make(map[string]bool, len(opts))
	for _, o := range opts {
		if hasControl(o.Key) {
			return nil, invalidf("option name %q has a control character; valid options: %s", truncate(o.Key, 80), strings.Join(valid, ", "))
		}
		if !slices.Contains(valid, o.Key) {
			if len(valid) == 1 {
				return nil, invalidf("unknown option %q: the only valid option for %s is %s", truncate(o.Key, 80), how, valid[0])
			}
			return nil, invalidf("unknown option %q: valid options for %s are %s", truncate(o.Key, 80), how, strings.Join(valid, ", "))
		}
		if seen[o.Key] {
			return nil, invalidf("option %s is given more than once: give it once", o.Key)
		}
		seen[o.Key] = true
		if hasControl(o.Value) {
			return nil, invalidf("option %s has a control character in its value %q: remove it", o.Key, truncate(o.Value, 80))
		}
		if o.Value == "" {
			return nil, invalidf("option %s is empty: give it a value (%s=...)", o.Key, o.Key)
		}
		if len(o.Value) > maxOptionValue {
			return nil, invalidf("option %s is %d bytes long, more than %d: give a real value", o.Key, len(o.Value), maxOptionValue)
		}
	}
	return opts, nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}

var mtuRE = regexp.MustCompile(`^[1-9][0-9]{0,5}$`)

// levelRE is a plain decimal number without leading zeros.
var levelRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,2})$`)

// parseLevel reads a QoS option: a plain decimal number from 0 to max.
// what says what the number is, for the error.
func parseLevel(key, v string, maxN int, what string) (int, error) {
	n, err := strconv.Atoi(v)
	if !levelRE.MatchString(v) || err != nil || n < 0 || n > maxN {
		return 0, invalidf("option %s=%q is out of range: give a whole number from 0 to %d (%s), or leave it out to set nothing",
			key, v, maxN, what)
	}
	return n, nil
}

var rdmaDeviceRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// checkIfname applies the kernel's rules for interface names (dev_valid_name).
// what names the name in the error ("parent").
func checkIfname(what, name string) error {
	switch {
	case len(name) > 15:
		return invalidf("%s %q is %d bytes long; Linux interface names have at most 15", what, name, len(name))
	case name == "." || name == "..":
		return invalidf("%s %q is not a valid interface name", what, name)
	case strings.ContainsAny(name, "/: \t\n"):
		return invalidf("%s %q is not a valid interface name: it may not contain '/', ':' or spaces", what, name)
	}
	return nil
}

func parseMTU(v string) (int, error) {
	// Plain decimal digits only: strconv.Atoi also takes "+1400", "-0" and
	// "01400", which no tool writes and which would be recorded as given.
	mtu, err := strconv.Atoi(v)
	if !mtuRE.MatchString(v) || err != nil || mtu < minMTU || mtu > maxMTU {
		return 0, invalidf("option %s=%q is not an MTU: give a whole number from %d to the parent's MTU, or leave it out to use the parent's",
			OptMTU, v, minMTU)
	}
	return mtu, nil
}
