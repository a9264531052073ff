package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// hostileCase is one bad request and the words its refusal must hold: what
// is wrong, which object, and what to do instead.
type hostileCase struct {
	name string
	op   string
	body []byte
	want []string
}

// jsonBody encodes v as Docker would: control characters inside strings
// travel escaped and arrive as they were.
func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lineDiff shows the lines only one of before and after holds.
func lineDiff(before, after string) string {
	var out []string
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPrivilegedHostileInput sends bad requests over the daemon's socket, each
// beside a network with a running endpoint. Every one must be refused with a
// short error that names the object and the fix, and leave the links, the
// state files and the CDI specs exactly as they were.
func TestPrivilegedHostileInput(t *testing.T) {
	e := newEnv(t)
	e.must(netnstest.CreateVeth(e.host, "p1", "p1peer", 1500))
	e.addHCA("p1")
	nid, other, eid := id("ca01"), id("ca02"), id("cb01")
	e.must(e.createNetwork(nid, map[string]string{"parent": "p0"}, "10.20.0.0/24 gw 10.20.0.1/24"))
	e.must(e.createNetwork(other, map[string]string{"parent": "p1"}, "10.21.0.0/24 gw 10.21.0.1/24"))
	_, err := e.createEndpoint(nid, eid, "10.20.0.2/24", "", nil)
	e.must(err)
	_, err = e.join(nid, eid)
	e.must(err)
	// The kernel adds its GID entries; once the daemon has recorded them in
	// the endpoint's file, its files stay as they are.
	if _, err := rdmatest.AddAddress(e.sysfs, "mlx5_0", 1, "10.20.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		rec, err := os.ReadFile(filepath.Join(e.stateDir, "endpoints", eid+".json"))
		e.must(err)
		if strings.Contains(string(rec), `"rdma_ready": true`) && !strings.Contains(treeDump(t, e.stateDir), ".tmp-") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint never recorded as RDMA-ready: %s", rec)
		}
	}
	newNet, newEP := id("ca99"), id("cb99")

	// Bodies of the kinds Docker sends, with one thing wrong.
	network := func(generic any) []byte {
		return jsonBody(t, map[string]any{"NetworkID": newNet, "Options": map[string]any{"com.docker.network.generic": generic},
			"IPv4Data": []map[string]string{{"AddressSpace": "LocalDefault", "Pool": "10.22.0.0/24", "Gateway": "10.22.0.1/24"}}})
	}
	parent := func(v string) []byte { return network(map[string]string{"parent": v}) }
	withP0 := func(k, v string) []byte { return network(map[string]string{"parent": "p0", k: v}) }
	endpoint := func(nid, eid string, iface map[string]string, opts any) []byte {
		return jsonBody(t, map[string]any{"NetworkID": nid, "EndpointID": eid, "Interface": iface, "Options": opts})
	}
	addr := func(ipv4, ipv6 string) []byte {
		return endpoint(nid, newEP, map[string]string{"Address": ipv4, "AddressIPv6": ipv6}, nil)
	}
	mac := func(m string) []byte {
		return endpoint(nid, newEP, map[string]string{"Address": "10.20.0.9/24", "MacAddress": m}, nil)
	}
	epOpt := func(k, v string) []byte {
		return endpoint(nid, newEP, map[string]string{"Address": "10.20.0.9/24"}, map[string]string{k: v})
	}
	pool := func(p, gw string) []byte {
		return jsonBody(t, map[string]any{"NetworkID": newNet, "Options": map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0"}},
			"IPv4Data": []map[string]string{{"AddressSpace": "LocalDefault", "Pool": p, "Gateway": gw}}})
	}
	raw := func(s string) []byte { return []byte(s) }
	long := strings.Repeat("x", 10000)
	validOpts := "parent, macvlan_mode, mtu, rdma_device, gid_check"
	huge := append(append([]byte(`{"NetworkID":"`+newNet+`","Pad":"`), strings.Repeat("a", 2<<20)...), `"}`...)

	cases := []hostileCase{
		// Wrong JSON types.
		{"network ID a number", "CreateNetwork", raw(`{"NetworkID":42}`), []string{"malformed request", "NetworkID"}},
		{"options a string", "CreateNetwork", raw(`{"NetworkID":"` + newNet + `","Options":"parent=p0"}`), []string{"malformed request", "Options"}},
		{"generic options a list", "CreateNetwork", network([]string{"parent", "p0"}), []string{"malformed options", "object of name: value"}},
		{"option value a number", "CreateNetwork", network(map[string]any{"parent": "p0", "mtu": 1500}), []string{`option "mtu" must be a string`, "1500"}},
		{"option value an object", "CreateNetwork", network(map[string]any{"parent": map[string]string{"name": "p0"}}), []string{`option "parent" must be a string`}},
		{"enable_ipv6 a string", "CreateNetwork", jsonBody(t, map[string]any{"NetworkID": newNet,
			"Options": map[string]any{"com.docker.network.enable_ipv6": "yes", "com.docker.network.generic": map[string]string{"parent": "p0"}}}),
			[]string{"com.docker.network.enable_ipv6 must be true or false"}},
		{"IPAM data an object", "CreateNetwork", raw(`{"NetworkID":"` + newNet + `","IPv4Data":{"Pool":"10.22.0.0/24"}}`), []string{"malformed request", "IPv4Data"}},
		{"endpoint interface a string", "CreateEndpoint", raw(`{"NetworkID":"` + nid + `","EndpointID":"` + newEP + `","Interface":"eth0"}`),
			[]string{"malformed request", "Interface"}},
		{"endpoint options a list", "CreateEndpoint", endpoint(nid, newEP, nil, []string{"mtu=1400"}), []string{"malformed options", "object of name: value"}},
		{"join body a list", "Join", raw(`["` + nid + `","` + eid + `"]`), []string{"malformed request"}},
		{"binary body", "CreateNetwork", raw("\x00\x01\x02garbage"), []string{"malformed request", "invalid character"}},
		{"empty body", "CreateEndpoint", raw(""), []string{"malformed request", "unexpected end of JSON input"}},

		// Huge values.
		{"2 MiB body", "CreateNetwork", huge, []string{"CreateNetwork", "larger than 1048576 bytes"}},
		{"10k-character option value", "CreateNetwork", withP0("rdma_device", long), []string{"option rdma_device is 10000 bytes long, more than 256"}},
		{"10k-character option name", "CreateNetwork", withP0(long, "1"), []string{"unknown option", validOpts}},
		{"MTU 2^63", "CreateNetwork", withP0("mtu", "9223372036854775808"), []string{`mtu="9223372036854775808" is not an MTU`, "from 68"}},
		{"MTU -1", "CreateNetwork", withP0("mtu", "-1"), []string{`mtu="-1" is not an MTU`}},
		{"endpoint MTU 2^63", "CreateEndpoint", epOpt("mtu", "9223372036854775808"), []string{`mtu="9223372036854775808" is not an MTU`}},
		{"100k-character network ID", "DeleteNetwork", jsonBody(t, map[string]string{"NetworkID": strings.Repeat("a", 100000)}),
			[]string{"invalid network ID", "1 to 64 letters and digits"}},

		// Path-like, control-character and unicode IDs and names.
		{"path-like network ID", "CreateNetwork", jsonBody(t, map[string]any{"NetworkID": "../../etc",
			"Options": map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0"}}}), []string{`invalid network ID "../../etc"`}},
		{"path-like endpoint ID", "CreateEndpoint", endpoint(nid, "../../etc/passwd", nil, nil), []string{`invalid endpoint ID "../../etc/passwd"`}},
		{"network ID with a newline", "DeleteNetwork", jsonBody(t, map[string]string{"NetworkID": newNet[:10] + "\n" + newNet[10:]}),
			[]string{"invalid network ID", `\n`}},
		{"endpoint ID with NUL", "Join", jsonBody(t, map[string]string{"NetworkID": nid, "EndpointID": "cb01\x00x", "SandboxKey": "/var/run/docker/netns/x"}),
			[]string{"invalid endpoint ID", `\x00`}},
		{"unicode network ID", "CreateNetwork", jsonBody(t, map[string]any{"NetworkID": "réseau",
			"Options": map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0"}}}), []string{`invalid network ID "réseau"`}},
		{"path-like parent", "CreateNetwork", parent("../../etc"), []string{`parent "../../etc" is not a valid interface name`, "'/'"}},
		{"parent with a newline", "CreateNetwork", parent("p0\nx"), []string{"option parent has a control character", "remove it"}},
		{"parent with NUL", "CreateNetwork", parent("p0\x00"), []string{"option parent has a control character", "remove it"}},
		{"unicode parent", "CreateNetwork", parent("pä0"), []string{`parent "pä0" not found`, "ip link show"}},
		{"parent of 16 bytes", "CreateNetwork", parent("p0p0p0p0p0p0p0p0"), []string{`parent "p0p0p0p0p0p0p0p0" is 16 bytes long`, "at most 15"}},
		{"parent ..", "CreateNetwork", parent(".."), []string{`parent ".." is not a valid interface name`}},
		{"path-like rdma_device", "CreateNetwork", withP0("rdma_device", "../mlx5_0"), []string{`rdma_device="../mlx5_0" is not an RDMA device name`, "rdma link show"}},
		{"path-like sandbox of an unknown endpoint", "Join", jsonBody(t, map[string]string{"NetworkID": nid, "EndpointID": newEP, "SandboxKey": "../../../proc/1/ns/net"}),
			[]string{`sandbox key "../../../proc/1/ns/net" is not an absolute clean path`, "path of the container's network namespace"}},

		// Unknown and duplicate IDs.
		{"endpoint on an unknown network", "CreateEndpoint", endpoint(newNet, newEP, map[string]string{"Address": "10.22.0.2/24"}, nil),
			[]string{"network " + newNet[:12] + " is not known to rdma-macvlan", "docker network rm"}},
		{"endpoint ID again on another network", "CreateEndpoint", endpoint(other, eid, map[string]string{"Address": "10.21.0.2/24"}, nil),
			[]string{"endpoint " + eid[:12] + " already exists on network " + nid[:12]}},
		{"endpoint ID sharing a link name", "CreateEndpoint", endpoint(nid, eid[:12]+strings.Repeat("f", 52), map[string]string{"Address": "10.20.0.3/24"}, nil),
			[]string{"would reuse link name rmv" + eid[:12], "retry"}},
		{"network option twice", "CreateNetwork", raw(`{"NetworkID":"` + newNet + `","Options":{"com.docker.network.generic":{"parent":"p0","parent":"p1"}}}`),
			[]string{"option parent is given more than once: give it once"}},
		{"endpoint option twice", "CreateEndpoint", raw(`{"NetworkID":"` + nid + `","EndpointID":"` + newEP + `","Options":{"mtu":"1400","mtu":"1300"}}`),
			[]string{"option mtu is given more than once: give it once"}},

		// Options meant for other drivers.
		// The engine's own com.docker.network.* keys are ignored (as the
		// built-in macvlan does); look-alikes are not.
		{"engine prefix look-alike", "CreateNetwork", withP0("com.docker.networks.bridge.name", "br0"),
			[]string{`unknown option "com.docker.networks.bridge.name"`, validOpts}},
		{"ipvlan option", "CreateNetwork", withP0("ipvlan_mode", "l2"), []string{`unknown option "ipvlan_mode"`, validOpts}},
		{"engine MTU not an MTU", "CreateNetwork", withP0("com.docker.network.driver.mtu", "big"), []string{`mtu="big" is not an MTU`}},
		{"macvlan_mode l3", "CreateNetwork", withP0("macvlan_mode", "l3"), []string{`macvlan_mode="l3" is not a macvlan mode`, "bridge, private, vepa, passthru"}},
		{"endpoint macvlan_mode", "CreateEndpoint", epOpt("macvlan_mode", "bridge"), []string{"option macvlan_mode applies to the whole network", "docker network create -o macvlan_mode"}},
		{"endpoint ipvlan option", "CreateEndpoint", epOpt("ipvlan_mode", "l2"), []string{`unknown option "ipvlan_mode"`, "only valid option", "mtu"}},

		// Addresses that are not addresses.
		{"IPv4 not an address", "CreateEndpoint", addr("banana", ""), []string{`address "banana" from IPAM is not in CIDR form`}},
		{"IPv4 without prefix", "CreateEndpoint", addr("10.20.0.9", ""), []string{`address "10.20.0.9" from IPAM is not in CIDR form`}},
		{"IPv4 octet 300", "CreateEndpoint", addr("10.20.0.300/24", ""), []string{`address "10.20.0.300/24" from IPAM is not in CIDR form`}},
		{"IPv6 not an address", "CreateEndpoint", addr("10.20.0.9/24", "fd00::zz/64"), []string{`address "fd00::zz/64" from IPAM is not in CIDR form`}},
		{"IPv6 address as IPv4", "CreateEndpoint", addr("fd00::9/64", ""), []string{`address "fd00::9/64" from IPAM is an IPv6 address in the IPv4 field (Address)`}},
		{"IPv4-mapped address as IPv4", "CreateEndpoint", addr("::ffff:10.20.0.9/120", ""), []string{`"::ffff:10.20.0.9/120" from IPAM is an IPv6 address in the IPv4 field`}},
		{"IPv4 address as IPv6", "CreateEndpoint", addr("10.20.0.9/24", "10.20.0.10/24"), []string{`address "10.20.0.10/24" from IPAM is an IPv4 address in the IPv6 field (AddressIPv6)`}},
		{"pool not an address", "CreateNetwork", pool("banana", ""), []string{`"banana"`, "CIDR"}},
		{"gateway not an address", "CreateNetwork", pool("10.22.0.0/24", "10.22.0.999/24"), []string{`"10.22.0.999/24"`, "gateway"}},

		// MAC addresses no container may have.
		{"multicast MAC", "CreateEndpoint", mac("01:00:5e:00:00:01"), []string{"MAC address 01:00:5e:00:00:01 is a multicast address: use a unicast one"}},
		{"broadcast MAC", "CreateEndpoint", mac("ff:ff:ff:ff:ff:ff"), []string{"MAC address ff:ff:ff:ff:ff:ff", "use a unicast one"}},
		{"zero MAC", "CreateEndpoint", mac("00:00:00:00:00:00"), []string{"MAC address 00:00:00:00:00:00", "02:42:ac:11:00:02"}},
		{"8-byte MAC", "CreateEndpoint", mac("02:00:00:00:00:00:00:01"), []string{`MAC address "02:00:00:00:00:00:00:01" is not a 6-byte Ethernet address`}},
		{"MAC not a MAC", "CreateEndpoint", mac("zz:zz"), []string{`MAC address "zz:zz" is not a 6-byte Ethernet address`, "02:42:ac:11:00:02"}},

		// Requests about known objects that do not agree with them.
		{"known network, another parent", "CreateNetwork", jsonBody(t, map[string]any{"NetworkID": nid,
			"Options":  map[string]any{"com.docker.network.generic": map[string]string{"parent": "p1"}},
			"IPv4Data": []map[string]string{{"AddressSpace": "LocalDefault", "Pool": "10.20.0.0/24", "Gateway": "10.20.0.1/24"}}}),
			[]string{"network " + nid[:12] + " already exists with other settings", "parent p0 (asked: p1)", "docker network rm"}},
		{"known network, another subnet", "CreateNetwork", jsonBody(t, map[string]any{"NetworkID": nid,
			"Options":  map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0"}},
			"IPv4Data": []map[string]string{{"AddressSpace": "LocalDefault", "Pool": "10.29.0.0/24", "Gateway": "10.29.0.1/24"}}}),
			[]string{"already exists with other settings", "IPv4 subnets 10.20.0.0/24 gateway 10.20.0.1 (asked: 10.29.0.0/24 gateway 10.29.0.1)"}},
		{"known network, another mtu", "CreateNetwork", jsonBody(t, map[string]any{"NetworkID": nid,
			"Options":  map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0", "mtu": "1400"}},
			"IPv4Data": []map[string]string{{"AddressSpace": "LocalDefault", "Pool": "10.20.0.0/24", "Gateway": "10.20.0.1/24"}}}),
			[]string{"already exists with other settings", "mtu the parent's (asked: 1400)"}},
		{"delete endpoint naming another network", "DeleteEndpoint", jsonBody(t, map[string]string{"NetworkID": other, "EndpointID": eid}),
			[]string{"endpoint " + eid[:12] + " belongs to network " + nid[:12] + `, not to network "` + other[:12] + `"`}},
		{"join naming another network", "Join", jsonBody(t, map[string]string{"NetworkID": other, "EndpointID": eid, "SandboxKey": "/var/run/docker/netns/x"}),
			[]string{"endpoint " + eid[:12] + " belongs to network " + nid[:12]}},
		{"leave naming another network", "Leave", jsonBody(t, map[string]string{"NetworkID": other, "EndpointID": eid}),
			[]string{"endpoint " + eid[:12] + " belongs to network " + nid[:12]}},
		{"external connectivity naming another network", "ProgramExternalConnectivity", jsonBody(t, map[string]any{"NetworkID": other, "EndpointID": eid}),
			[]string{"endpoint " + eid[:12] + " belongs to network " + nid[:12]}},
		{"endpoint info naming another network", "EndpointOperInfo", jsonBody(t, map[string]string{"NetworkID": other, "EndpointID": eid}),
			[]string{"endpoint " + eid[:12] + " belongs to network " + nid[:12]}},
		{"1 MB sandbox key", "Join", jsonBody(t, map[string]string{"NetworkID": nid, "EndpointID": eid, "SandboxKey": "/" + strings.Repeat("a", 1000000)}),
			[]string{"sandbox key is 1000001 bytes long, more than 4096"}},
		{"relative sandbox key", "Join", jsonBody(t, map[string]string{"NetworkID": nid, "EndpointID": eid, "SandboxKey": "netns/x"}),
			[]string{`sandbox key "netns/x" is not an absolute clean path`}},
		{"sandbox key with ..", "Join", jsonBody(t, map[string]string{"NetworkID": nid, "EndpointID": eid, "SandboxKey": "/var/run/../../proc/1/ns/net"}),
			[]string{"is not an absolute clean path"}},
		{"sandbox key with a newline", "Join", jsonBody(t, map[string]string{"NetworkID": nid, "EndpointID": eid, "SandboxKey": "/var/run/docker/netns/x\ny"}),
			[]string{"sandbox key", "control character"}},
		{"empty sandbox key", "Join", jsonBody(t, map[string]string{"NetworkID": nid, "EndpointID": eid}),
			[]string{`sandbox key "" is not an absolute clean path`}},

		// Numbers that are not plain decimal.
		{"MTU +1400", "CreateNetwork", withP0("mtu", "+1400"), []string{`mtu="+1400" is not an MTU`}},
		{"MTU -0", "CreateNetwork", withP0("mtu", "-0"), []string{`mtu="-0" is not an MTU`}},
		{"MTU 01400", "CreateNetwork", withP0("mtu", "01400"), []string{`mtu="01400" is not an MTU`}},
		{"MTU with a space", "CreateNetwork", withP0("mtu", " 1400"), []string{`mtu=" 1400" is not an MTU`}},
		{"endpoint MTU +1400", "CreateEndpoint", epOpt("mtu", "+1400"), []string{`mtu="+1400" is not an MTU`}},

		// JSON the protocol's encoder never writes.
		{"field name in lower case", "CreateNetwork", raw(`{"networkid":"` + newNet + `","Options":{"com.docker.network.generic":{"parent":"p0"}}}`),
			[]string{"field networkid is spelled NetworkID"}},
		{"nested field name in lower case", "CreateEndpoint", raw(`{"NetworkID":"` + nid + `","EndpointID":"` + newEP + `","Interface":{"address":"10.20.0.9/24"}}`),
			[]string{"field Interface.address is spelled Interface.Address"}},
		{"IPAM field in upper case", "CreateNetwork", raw(`{"NetworkID":"` + newNet + `","Options":{"com.docker.network.generic":{"parent":"p0"}},"IPv4Data":[{"POOL":"10.22.0.0/24"}]}`),
			[]string{"field IPv4Data[].POOL is spelled IPv4Data[].Pool"}},
		{"network ID twice", "CreateNetwork", raw(`{"NetworkID":"` + nid + `","NetworkID":"` + newNet + `","Options":{"com.docker.network.generic":{"parent":"p0"}}}`),
			[]string{"field NetworkID is given more than once"}},
		{"options twice", "CreateNetwork", raw(`{"NetworkID":"` + newNet + `","Options":{"com.docker.network.generic":{"parent":"p1"}},"Options":{"com.docker.network.generic":{"parent":"p0"}}}`),
			[]string{"field Options is given more than once"}},
		{"generic options twice", "CreateNetwork", raw(`{"NetworkID":"` + newNet + `","Options":{"com.docker.network.generic":{"parent":"p1"},"com.docker.network.generic":{"parent":"p0"}}}`),
			[]string{"field Options.com.docker.network.generic is given more than once"}},
		{"endpoint ID twice", "DeleteEndpoint", raw(`{"NetworkID":"` + nid + `","EndpointID":"` + newEP + `","EndpointID":"` + eid + `"}`),
			[]string{"field EndpointID is given more than once"}},

		// Nesting no encoder of the protocol writes, costing the decoder
		// memory per level. (TestDeepNestingRefused sends 1 MiB ones.)
		{"40 KB of nested IPAM data", "CreateNetwork", raw(`{"NetworkID":"` + newNet + `","IPv4Data":` + nested(20000) + `}`), []string{tooDeep}},
		{"40 KB of nested lists", "CreateEndpoint", raw(nested(20000)), []string{tooDeep}},
		{"nested endpoint options", "CreateEndpoint", raw(`{"NetworkID":"` + nid + `","EndpointID":"` + newEP + `","Options":{"x":` + nested(5000) + `}}`), []string{tooDeep}},
		{"nested objects in a join", "Join", raw(strings.Repeat(`{"SandboxKey":`, 10000) + `"/x"` + strings.Repeat("}", 10000)), []string{tooDeep}},
		{"33 levels in a delete", "DeleteEndpoint", raw(`{"NetworkID":"` + nid + `","EndpointID":"` + newEP + `","Pad":` + nested(32) + `}`), []string{tooDeep}},
	}

	wantLinks, wantState, wantCDI := linkNames(t, e.host), treeDump(t, e.stateDir), treeDump(t, e.cdiDir)
	clean := 0
	for _, c := range cases {
		ok := t.Run(c.name, func(t *testing.T) {
			err := e.c.CallRaw(c.op, c.body, nil)
			var ce *plugintest.CallError
			if !errors.As(err, &ce) {
				// Undo what was wrongly accepted, so that the next cases
				// start from the same world.
				_ = e.c.Call("DeleteEndpoint", map[string]string{"NetworkID": nid, "EndpointID": newEP}, nil)
				_ = e.c.Call("DeleteNetwork", map[string]string{"NetworkID": newNet}, nil)
				t.Fatalf("%s: want an error answer, got %v", c.op, err)
			}
			for _, w := range c.want {
				if !strings.Contains(ce.Msg, w) {
					t.Errorf("error %.300q does not say %q", ce.Msg, w)
				}
			}
			checkErrorText(t, c.op, ce.Msg)
			if got := linkNames(t, e.host); !slices.Equal(got, wantLinks) {
				t.Errorf("links changed: %v, want %v", got, wantLinks)
			}
			if got := treeDump(t, e.stateDir); got != wantState {
				t.Errorf("state changed:\n%s", lineDiff(wantState, got))
			}
			if got := treeDump(t, e.cdiDir); got != wantCDI {
				t.Errorf("CDI specs changed:\n%s", lineDiff(wantCDI, got))
			}
		})
		if ok {
			clean++
		}
	}
	t.Logf("hostile inputs: %d sent, %d refused with a clear error and no link, state file or CDI spec left behind", len(cases), clean)

	// Protocol calls with another method than POST: refused, nothing done.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.sock)
	}}}
	create := network(map[string]string{"parent": "p0"})
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, "FOO"} {
		t.Run("CreateNetwork by "+m, func(t *testing.T) {
			req, err := http.NewRequest(m, "http://plugin/NetworkDriver.CreateNetwork", bytes.NewReader(create))
			e.must(err)
			resp, err := hc.Do(req)
			e.must(err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
				_ = e.c.Call("DeleteNetwork", map[string]string{"NetworkID": newNet}, nil)
				t.Fatalf("%s: HTTP %d (Allow %q) %s, want 405 allowing POST", m, resp.StatusCode, resp.Header.Get("Allow"), body)
			}
			if !strings.Contains(string(body), "CreateNetwork takes POST, not "+m) {
				t.Errorf("answer %s does not say CreateNetwork takes POST", body)
			}
			if got := treeDump(t, e.stateDir); got != wantState {
				t.Errorf("state changed:\n%s", lineDiff(wantState, got))
			}
		})
	}
	// Bodies that say they are not JSON: refused, nothing done. Docker's
	// plugin client sends no Content-Type; JSON types are accepted.
	for _, ct := range []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"} {
		t.Run("CreateNetwork as "+ct, func(t *testing.T) {
			resp, err := hc.Post("http://plugin/NetworkDriver.CreateNetwork", ct, bytes.NewReader(create))
			e.must(err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				_ = e.c.Call("DeleteNetwork", map[string]string{"NetworkID": newNet}, nil)
				t.Fatalf("%s: HTTP %d %s, want 415", ct, resp.StatusCode, body)
			}
			if !strings.Contains(string(body), "CreateNetwork request has Content-Type") || !strings.Contains(string(body), "application/json") {
				t.Errorf("answer %s does not name the type and how to send JSON", body)
			}
			if got := treeDump(t, e.stateDir); got != wantState {
				t.Errorf("state changed:\n%s", lineDiff(wantState, got))
			}
			if got := linkNames(t, e.host); !slices.Equal(got, wantLinks) {
				t.Errorf("links changed: %v, want %v", got, wantLinks)
			}
		})
	}
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		req, err := http.NewRequest(m, "http://plugin"+plugin.StatusPath, nil)
		e.must(err)
		resp, err := hc.Do(req)
		e.must(err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: HTTP %d, want 405", m, plugin.StatusPath, resp.StatusCode)
		}
	}

	// A retry of the request that created a network is answered as done,
	// whatever the order of its options and whatever else the engine adds
	// at the top level (Docker 28 sends com.docker.network.enable_ipv4).
	retry := raw(`{"NetworkID":"` + nid + `","Options":{"com.docker.network.enable_ipv4":true,"com.docker.network.generic":{"parent":"p0"}},` +
		`"IPv4Data":[{"AddressSpace":"LocalDefault","Gateway":"10.20.0.1/24","Pool":"10.20.0.0/24"}],"IPv6Data":[]}`)
	if err := e.c.CallRaw("CreateNetwork", retry, nil); err != nil {
		t.Errorf("identical CreateNetwork retry refused: %v", err)
	}
	if got := treeDump(t, e.stateDir); got != wantState {
		t.Errorf("state changed by a retry:\n%s", lineDiff(wantState, got))
	}
}
