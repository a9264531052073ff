package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
)

// Option keys libnetwork puts into CreateNetwork's Options.
const (
	genericOptions = "com.docker.network.generic"
	enableIPv6     = "com.docker.network.enable_ipv6"
	internal       = "com.docker.network.internal"
)

// createNetworkRequest is network.CreateNetworkRequest with its options kept
// raw, so duplicate keys and wrong types can be told apart.
type createNetworkRequest struct {
	NetworkID string
	Options   map[string]json.RawMessage
	IPv4Data  []*network.IPAMData
	IPv6Data  []*network.IPAMData
}

type createEndpointRequest struct {
	NetworkID  string
	EndpointID string
	Interface  *network.EndpointInterface
	Options    json.RawMessage
}

func decode(body []byte, v any) error {
	if err := checkFields(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &driver.BadRequestError{Msg: fmt.Sprintf("malformed request: field %s must be a JSON %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)}
		}
		return &driver.BadRequestError{Msg: fmt.Sprintf("malformed request: %v", err)}
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "map", "struct":
		return "object"
	case "slice", "array":
		return "array"
	case "bool":
		return "boolean"
	default:
		return "number"
	}
}

func createNetwork(d *driver.Driver, body []byte) (any, error) {
	var req createNetworkRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	r := driver.CreateNetworkRequest{
		NetworkID: req.NetworkID,
		IPv4:      subnets(req.IPv4Data),
		IPv6:      subnets(req.IPv6Data),
	}
	var err error
	if raw, ok := req.Options[genericOptions]; ok {
		if r.Options, err = decodeOptions(raw, engineOption); err != nil {
			return nil, err
		}
	}
	if r.EnableIPv6, err = optionalBool(req.Options, enableIPv6); err != nil {
		return nil, err
	}
	if r.Internal, err = optionalBool(req.Options, internal); err != nil {
		return nil, err
	}
	return struct{}{}, d.CreateNetwork(r)
}

// engineOption reports the engine's own keys among a network's generic
// options, whatever their JSON type: the driver ignores them (except the
// engine's MTU, which it reads as -o mtu).
func engineOption(key string) bool {
	return strings.HasPrefix(key, driver.EngineOptionPrefix) && key != driver.OptEngineMTU
}

func subnets(data []*network.IPAMData) []driver.Subnet {
	var out []driver.Subnet
	for _, d := range data {
		if d != nil && d.Pool != "" {
			out = append(out, driver.Subnet{Pool: d.Pool, Gateway: d.Gateway})
		}
	}
	return out
}

func optionalBool(opts map[string]json.RawMessage, key string) (bool, error) {
	raw, ok := opts[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, &driver.InvalidOptionError{Msg: fmt.Sprintf("option %s must be true or false", key)}
	}
	return b, nil
}

// decodeOptions reads a JSON object of options in order, keeping duplicate
// keys. Values must be strings, except under keys for which skip says true
// (libnetwork's own labels), which are dropped.
func decodeOptions(raw json.RawMessage, skip func(key string) bool) ([]driver.Option, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, &driver.BadRequestError{Msg: fmt.Sprintf("malformed options: %v", err)}
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, &driver.BadRequestError{Msg: "malformed options: expected an object of name: value"}
	}
	var out []driver.Option
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &driver.BadRequestError{Msg: fmt.Sprintf("malformed options: %v", err)}
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, &driver.BadRequestError{Msg: fmt.Sprintf("malformed value of option %q: %v", abbreviate([]byte(key)), err)}
		}
		if skip != nil && skip(key) {
			continue
		}
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			return nil, &driver.InvalidOptionError{Msg: fmt.Sprintf("option %q must be a string, got %s", abbreviate([]byte(key)), abbreviate(val))}
		}
		out = append(out, driver.Option{Key: key, Value: s})
	}
	if _, err := dec.Token(); err != nil {
		return nil, &driver.BadRequestError{Msg: fmt.Sprintf("malformed options: %v", err)}
	}
	return out, nil
}

// abbreviate shortens client input for an error message and replaces what
// a terminal would interpret.
func abbreviate(b []byte) string {
	s := strings.ToValidUTF8(string(b), "?")
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

func createEndpoint(d *driver.Driver, body []byte) (any, error) {
	var req createEndpointRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	r := driver.CreateEndpointRequest{NetworkID: req.NetworkID, EndpointID: req.EndpointID}
	if req.Interface != nil {
		r.IPv4, r.IPv6, r.MAC = req.Interface.Address, req.Interface.AddressIPv6, req.Interface.MacAddress
	}
	if len(req.Options) > 0 {
		var err error
		if r.Options, err = decodeOptions(req.Options, driver.IsLibnetworkLabel); err != nil {
			return nil, err
		}
		if r.ContainerIfname, err = endpointIfname(req.Options); err != nil {
			return nil, err
		}
	}
	res, err := d.CreateEndpoint(r)
	if err != nil {
		return nil, err
	}
	out := &network.CreateEndpointResponse{}
	if res.MAC != "" {
		// Only what the driver chose: IPAM's addresses are Docker's.
		out.Interface = &network.EndpointInterface{MacAddress: res.MAC}
	}
	return out, nil
}

// endpointIfname returns the interface name asked for the endpoint inside
// the container (docker run --network name=N,driver-opt=com.docker.network.endpoint.ifname=NAME,
// compose's interface_name), or "". Docker 28+ applies it for its built-in
// drivers; for a remote driver only moby v2 (Docker 29) takes the name its
// Join answers (Docker 28's remote driver drops it: the interface stays ethN).
func endpointIfname(raw json.RawMessage) (string, error) {
	var opts map[string]json.RawMessage
	if err := json.Unmarshal(raw, &opts); err != nil {
		return "", nil // decodeOptions has judged the object already
	}
	v, ok := opts[driver.OptEndpointIfname]
	if !ok {
		return "", nil
	}
	var name string
	if err := json.Unmarshal(v, &name); err != nil {
		return "", &driver.InvalidOptionError{Msg: fmt.Sprintf("option %s must be a string, got %s", driver.OptEndpointIfname, abbreviate(v))}
	}
	return name, nil
}

func endpointInfo(d *driver.Driver, body []byte) (any, error) {
	var req network.InfoRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	info, err := d.EndpointInfo(req.NetworkID, req.EndpointID)
	if err != nil {
		return nil, err
	}
	return &network.InfoResponse{Value: info}, nil
}

func join(d *driver.Driver, body []byte) (any, error) {
	var req network.JoinRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	res, err := d.Join(req.NetworkID, req.EndpointID, req.SandboxKey)
	if err != nil {
		return nil, err
	}
	return &joinResponse{
		InterfaceName:         interfaceName{SrcName: res.SrcName, DstPrefix: res.DstPrefix, DstName: res.DstName},
		Gateway:               res.Gateway,
		GatewayIPv6:           res.GatewayIPv6,
		DisableGatewayService: res.DisableGatewayService,
	}, nil
}

// joinResponse is network.JoinResponse with DstName, which go-plugins-helpers
// lacks: the container-side interface name Docker 28+ takes from a remote
// driver (older engines ignore it and name the interface from DstPrefix).
type joinResponse struct {
	InterfaceName         interfaceName
	Gateway               string
	GatewayIPv6           string
	DisableGatewayService bool
}

type interfaceName struct {
	SrcName   string
	DstPrefix string
	DstName   string `json:",omitempty"`
}

// allocateNetwork is only called on swarm managers for global-scope drivers;
// this one is local-scope, so it validates the options and hands them back.
func allocateNetwork(_ *driver.Driver, body []byte) (any, error) {
	var req network.AllocateNetworkRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	opts := make([]driver.Option, 0, len(req.Options))
	for k, v := range req.Options {
		opts = append(opts, driver.Option{Key: k, Value: v})
	}
	if _, err := driver.ParseNetworkOptions(opts); err != nil {
		return nil, err
	}
	return &network.AllocateNetworkResponse{Options: req.Options}, nil
}

// capabilitiesResponse is GetCapabilities' answer. go-plugins-helpers'
// type has no GwAllocChecker: Docker 28 added it, and engines before ignore
// the field.
type capabilitiesResponse struct {
	Scope             string
	ConnectivityScope string
	GwAllocChecker    bool
}

// gwAllocCheckRequest is what Docker 28+ sends before CreateNetwork when the
// driver advertises GwAllocChecker: the network's options, as CreateNetwork
// will get them.
type gwAllocCheckRequest struct {
	Options map[string]json.RawMessage
}

type gwAllocCheckResponse struct {
	SkipIPv4 bool
	SkipIPv6 bool
}

// gwAllocCheck answers whether Docker should reserve gateway addresses in a
// new network's subnets (see driver.SkipGatewayAllocation).
func gwAllocCheck(_ *driver.Driver, body []byte) (any, error) {
	var req gwAllocCheckRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	var opts []driver.Option
	if raw, ok := req.Options[genericOptions]; ok {
		var err error
		if opts, err = decodeOptions(raw, engineOption); err != nil {
			return nil, err
		}
	}
	skip := driver.SkipGatewayAllocation(opts)
	return &gwAllocCheckResponse{SkipIPv4: skip, SkipIPv6: skip}, nil
}

// The calls whose answer is empty: each decodes its request and answers {}
// with the driver's error. A local-scope driver has nothing to do for the
// last three but check their bodies: revoking what it never programmed,
// node discovery, and freeing what AllocateNetwork handed back.
var (
	deleteNetwork  = empty(func(d *driver.Driver, r *network.DeleteNetworkRequest) error { return d.DeleteNetwork(r.NetworkID) })
	deleteEndpoint = empty(func(d *driver.Driver, r *network.DeleteEndpointRequest) error {
		return d.DeleteEndpoint(r.NetworkID, r.EndpointID)
	})
	leave                       = empty(func(d *driver.Driver, r *network.LeaveRequest) error { return d.Leave(r.NetworkID, r.EndpointID) })
	programExternalConnectivity = empty(func(d *driver.Driver, r *network.ProgramExternalConnectivityRequest) error {
		return d.ProgramExternalConnectivity(r.NetworkID, r.EndpointID)
	})
	revokeExternalConnectivity = empty(nothing[network.RevokeExternalConnectivityRequest])
	discover                   = empty(nothing[network.DiscoveryNotification])
	freeNetwork                = empty(nothing[network.FreeNetworkRequest])
)

func empty[R any](do func(*driver.Driver, *R) error) func(*driver.Driver, []byte) (any, error) {
	return func(d *driver.Driver, body []byte) (any, error) {
		var req R
		if err := decode(body, &req); err != nil {
			return nil, err
		}
		return struct{}{}, do(d, &req)
	}
}

func nothing[R any](*driver.Driver, *R) error { return nil }
