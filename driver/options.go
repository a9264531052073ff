package driver

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// The option names, ranges and values are api's (api/options.go), the
// contract the CLI, rdma-exec and the runtime read too.

var (
	networkOptionNames  = []string{api.OptParent, api.OptMode, api.OptMTU, api.OptRDMADevice, api.OptGIDCheck, api.OptAddressCheck, api.OptTrafficClass, api.OptServiceLevel}
	endpointOptionNames = []string{api.OptMTU}
	macvlanModeNames    = []string{api.ModeBridge, api.ModePrivate, api.ModeVEPA, api.ModePassthru}
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
	GIDCheck   string // api.GIDCheckWarn (default) or api.GIDCheckStrict
	// AddressCheck is api.AddressCheckWarn (default), api.AddressCheckStrict or
	// api.AddressCheckOff.
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
		case api.OptParent:
			if err := checkIfname("parent", o.Value); err != nil {
				return out, err
			}
			out.Parent = o.Value
		case api.OptMode:
			if !slices.Contains(macvlanModeNames, o.Value) {
				return out, invalidf("option %s=%q is not a macvlan mode: use one of %s (default %s)",
					api.OptMode, o.Value, strings.Join(macvlanModeNames, ", "), api.ModeBridge)
			}
			out.Mode = o.Value
		case api.OptMTU:
			mtu, err := parseMTU(o.Value)
			if err != nil {
				return out, err
			}
			out.MTU = mtu
		case api.OptRDMADevice:
			if !rdmaDeviceRE.MatchString(o.Value) {
				return out, invalidf("option %s=%q is not an RDMA device name (like mlx5_0 or rxe0; list them with: rdma link show)",
					api.OptRDMADevice, o.Value)
			}
			out.RDMADevice = o.Value
		case api.OptGIDCheck:
			if o.Value != api.GIDCheckWarn && o.Value != api.GIDCheckStrict {
				return out, invalidf("option %s=%q: use %s (log a container whose RDMA is not ready) or %s (fail its start)",
					api.OptGIDCheck, o.Value, api.GIDCheckWarn, api.GIDCheckStrict)
			}
			out.GIDCheck = o.Value
		case api.OptAddressCheck:
			if o.Value != api.AddressCheckWarn && o.Value != api.AddressCheckStrict && o.Value != api.AddressCheckOff {
				return out, invalidf("option %s=%q: use %s (probe each container's addresses on the parent's segment after its start and report another host holding them), %s (probe before the start, about 0.4 s, and refuse it on a duplicate) or %s (send no probe)",
					api.OptAddressCheck, o.Value, api.AddressCheckWarn, api.AddressCheckStrict, api.AddressCheckOff)
			}
			out.AddressCheck = o.Value
		case api.OptTrafficClass:
			n, err := parseLevel(o.Key, o.Value, api.TrafficClassMax,
				"the IP ToS byte RoCE v2 packets carry, as NCCL_IB_TC takes it: DSCP times 4 plus the ECN bits, e.g. 104 for DSCP 26, 106 for DSCP 26 with ECT(0)")
			if err != nil {
				return out, err
			}
			out.TrafficClass = Optional{N: n, Set: true}
		case api.OptServiceLevel:
			n, err := parseLevel(o.Key, o.Value, api.ServiceLevelMax,
				"the 802.1p priority of VLAN-tagged RoCE frames, as NCCL_IB_SL takes it")
			if err != nil {
				return out, err
			}
			out.ServiceLevel = Optional{N: n, Set: true}
		}
	}
	if out.Parent == "" {
		return out, invalidf("option %s is required: the RoCE netdev the containers' macvlan links hang off, e.g. -o %s=ens2f0 (or ens2f0.10 for VLAN 10)",
			api.OptParent, api.OptParent)
	}
	if out.Mode == "" {
		out.Mode = api.ModeBridge
	}
	if out.GIDCheck == "" {
		out.GIDCheck = api.GIDCheckWarn
	}
	if out.AddressCheck == "" {
		out.AddressCheck = api.AddressCheckWarn
	}
	return out, nil
}

// withoutEngineOptions drops the engine's own keys from opts, turning
// OptEngineMTU into api.OptMTU. Both MTU keys may be given only with one value.
func withoutEngineOptions(opts []Option) ([]Option, error) {
	own := make([]Option, 0, len(opts))
	var engineMTU *Option
	for _, o := range opts {
		switch {
		case o.Key == OptEngineMTU:
			if engineMTU != nil {
				return nil, invalidf("option %s is given more than once: give it once", OptEngineMTU)
			}
			engineMTU = &Option{Key: api.OptMTU, Value: o.Value}
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
		if o.Key == api.OptMTU {
			if o.Value != engineMTU.Value {
				return nil, invalidf("options %s=%q and %s=%q disagree: give one of them", api.OptMTU, o.Value, OptEngineMTU, engineMTU.Value)
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
		if o.Key == api.OptMTU {
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
			api.OptMTU, v, minMTU)
	}
	return mtu, nil
}
