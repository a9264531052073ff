package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

func opts(kv ...string) []Option {
	var out []Option
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Option{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestParseNetworkOptions(t *testing.T) {
	tests := []struct {
		name    string
		in      []Option
		want    NetworkOptions
		wantErr []string // substrings of the error; nil: success
	}{
		{name: "parent only defaults to bridge", in: opts("parent", "ens2f0"), want: NetworkOptions{Parent: "ens2f0", Mode: api.ModeBridge, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn}},
		{name: "all options", in: opts("parent", "ens2f0.10", "macvlan_mode", "vepa", "mtu", "4200", "rdma_device", "mlx5_0", "gid_check", "strict"),
			want: NetworkOptions{Parent: "ens2f0.10", Mode: api.ModeVEPA, MTU: 4200, RDMADevice: "mlx5_0", GIDCheck: api.GIDCheckStrict, AddressCheck: api.AddressCheckWarn}},
		{name: "private", in: opts("parent", "p", "macvlan_mode", "private"), want: NetworkOptions{Parent: "p", Mode: api.ModePrivate, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn}},
		{name: "passthru", in: opts("parent", "p", "macvlan_mode", "passthru"), want: NetworkOptions{Parent: "p", Mode: api.ModePassthru, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn}},
		{name: "bad gid_check", in: opts("parent", "p", "gid_check", "always"), wantErr: []string{`gid_check="always"`, "warn", "strict"}},
		{name: "missing parent", in: opts("mtu", "1500"), wantErr: []string{"option parent is required", "-o parent="}},
		{name: "no options", in: nil, wantErr: []string{"option parent is required"}},
		{name: "empty parent", in: opts("parent", ""), wantErr: []string{"option parent is empty"}},
		{name: "parent too long", in: opts("parent", "abcdefghijklmnop"), wantErr: []string{"at most 15"}},
		{name: "parent with slash", in: opts("parent", "../etc"), wantErr: []string{"not a valid interface name"}},
		{name: "parent with colon", in: opts("parent", "eth0:1"), wantErr: []string{"not a valid interface name"}},
		{name: "parent dot", in: opts("parent", "."), wantErr: []string{"not a valid interface name"}},
		{name: "parent with control char", in: opts("parent", "eth\x1b0"), wantErr: []string{"control character", "parent"}},
		{name: "bad mode", in: opts("parent", "p", "macvlan_mode", "l2"), wantErr: []string{`"l2" is not a macvlan mode`, "bridge, private, vepa, passthru"}},
		{name: "mode wrong case", in: opts("parent", "p", "macvlan_mode", "Bridge"), wantErr: []string{"not a macvlan mode"}},
		{name: "mtu not a number", in: opts("parent", "p", "mtu", "big"), wantErr: []string{`mtu="big" is not an MTU`}},
		{name: "mtu too small", in: opts("parent", "p", "mtu", "67"), wantErr: []string{"is not an MTU", "from 68"}},
		{name: "mtu negative", in: opts("parent", "p", "mtu", "-1500"), wantErr: []string{"is not an MTU"}},
		{name: "mtu huge", in: opts("parent", "p", "mtu", "99999999999999999999"), wantErr: []string{"is not an MTU"}},
		{name: "bad rdma device", in: opts("parent", "p", "rdma_device", "mlx5/0"), wantErr: []string{"not an RDMA device name", "rdma link show"}},
		{name: "unknown option lists valid ones", in: opts("parent", "p", "ipvlan_mode", "l2"),
			wantErr: []string{`unknown option "ipvlan_mode"`, "parent, macvlan_mode, mtu, rdma_device, gid_check, address_check, traffic_class, service_level"}},
		// QoS: traffic_class 0-255 (the IP ToS byte), service_level 0-7.
		{name: "traffic class and service level", in: opts("parent", "p", "traffic_class", "106", "service_level", "3"),
			want: NetworkOptions{Parent: "p", Mode: api.ModeBridge, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn, TrafficClass: Optional{N: 106, Set: true}, ServiceLevel: Optional{N: 3, Set: true}}},
		{name: "lowest values are set, not absent", in: opts("parent", "p", "traffic_class", "0", "service_level", "0"),
			want: NetworkOptions{Parent: "p", Mode: api.ModeBridge, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn, TrafficClass: Optional{N: 0, Set: true}, ServiceLevel: Optional{N: 0, Set: true}}},
		{name: "highest values", in: opts("parent", "p", "traffic_class", "255", "service_level", "7"),
			want: NetworkOptions{Parent: "p", Mode: api.ModeBridge, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn, TrafficClass: Optional{N: 255, Set: true}, ServiceLevel: Optional{N: 7, Set: true}}},
		{name: "traffic class above 255", in: opts("parent", "p", "traffic_class", "256"), wantErr: []string{`traffic_class="256" is out of range`, "from 0 to 255", "NCCL_IB_TC"}},
		{name: "traffic class negative", in: opts("parent", "p", "traffic_class", "-1"), wantErr: []string{`traffic_class="-1" is out of range`, "from 0 to 255"}},
		{name: "traffic class in hex", in: opts("parent", "p", "traffic_class", "0x6a"), wantErr: []string{`traffic_class="0x6a" is out of range`, "whole number"}},
		{name: "traffic class with a leading zero", in: opts("parent", "p", "traffic_class", "0106"), wantErr: []string{`traffic_class="0106"`}},
		{name: "traffic class with a sign", in: opts("parent", "p", "traffic_class", "+106"), wantErr: []string{`traffic_class="+106"`}},
		{name: "traffic class not a number", in: opts("parent", "p", "traffic_class", "af31"), wantErr: []string{`traffic_class="af31"`, "DSCP"}},
		// DSCP is the upper six bits of the class: 26 is 104; 106 is DSCP
		// 26 with ECT(0) in the ECN bits.
		{name: "traffic class explained", in: opts("parent", "p", "traffic_class", "1000"), wantErr: []string{"DSCP times 4 plus the ECN bits", "104 for DSCP 26", "106 for DSCP 26 with ECT(0)"}},
		{name: "service level above 7", in: opts("parent", "p", "service_level", "8"), wantErr: []string{`service_level="8" is out of range`, "from 0 to 7", "NCCL_IB_SL"}},
		{name: "service level negative", in: opts("parent", "p", "service_level", "-0"), wantErr: []string{`service_level="-0" is out of range`}},
		{name: "service level with spaces", in: opts("parent", "p", "service_level", " 3"), wantErr: []string{`service_level=" 3" is out of range`}},
		{name: "empty traffic class", in: opts("parent", "p", "traffic_class", ""), wantErr: []string{"option traffic_class is empty"}},
		// The engine's own keys are ignored, as the built-in macvlan does.
		{name: "engine keys ignored", in: opts("parent", "p", "com.docker.network.bridge.name", "br0", "com.docker.network.enable_ipv4", "true",
			"com.docker.network.advertise_addr_nmsgs", "3"), want: NetworkOptions{Parent: "p", Mode: api.ModeBridge, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn}},
		{name: "engine mtu is mtu", in: opts("parent", "p", "com.docker.network.driver.mtu", "1400"), want: NetworkOptions{Parent: "p", Mode: api.ModeBridge, MTU: 1400, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn}},
		{name: "engine mtu and mtu agree", in: opts("parent", "p", "mtu", "1400", "com.docker.network.driver.mtu", "1400"), want: NetworkOptions{Parent: "p", Mode: api.ModeBridge, MTU: 1400, GIDCheck: api.GIDCheckWarn, AddressCheck: api.AddressCheckWarn}},
		{name: "engine mtu and mtu disagree", in: opts("parent", "p", "mtu", "1400", "com.docker.network.driver.mtu", "1300"), wantErr: []string{"disagree", "give one"}},
		{name: "engine mtu checked", in: opts("parent", "p", "com.docker.network.driver.mtu", "big"), wantErr: []string{`mtu="big" is not an MTU`}},
		{name: "typo of our option still refused", in: opts("parent", "p", "rdma_devcie", "mlx5_0"), wantErr: []string{`unknown option "rdma_devcie"`}},
		{name: "near miss of the engine prefix refused", in: opts("parent", "p", "com.docker.networks.mtu", "1400"), wantErr: []string{"unknown option"}},
		{name: "duplicate option", in: opts("parent", "p", "parent", "q"), wantErr: []string{"option parent is given more than once"}},
		{name: "control char in key", in: opts("parent", "p", "mt\nu", "1500"), wantErr: []string{"control character"}},
		{name: "control char in mode", in: opts("parent", "p", "macvlan_mode", "bridge\x00"), wantErr: []string{"control character"}},
		{name: "value too long", in: opts("parent", "p", "rdma_device", strings.Repeat("a", 300)), wantErr: []string{"more than 256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNetworkOptions(tt.in)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if got != tt.want {
					t.Fatalf("got %+v, want %+v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, got %+v", got)
			}
			var inv *InvalidOptionError
			if !errors.As(err, &inv) {
				t.Errorf("error %v is not an InvalidOptionError", err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestParseEndpointOptions(t *testing.T) {
	tests := []struct {
		name    string
		in      []Option
		want    EndpointOptions
		wantErr string
	}{
		{name: "none", in: nil},
		{name: "libnetwork labels are skipped", in: opts("com.docker.network.endpoint.exposedports", "x", "com.docker.network.portmap", "y")},
		{name: "mtu", in: opts("mtu", "1400"), want: EndpointOptions{MTU: 1400}},
		{name: "bad mtu", in: opts("mtu", "x"), wantErr: "is not an MTU"},
		{name: "network-only option", in: opts("parent", "eth1"), wantErr: "applies to the whole network"},
		{name: "network-only mode", in: opts("macvlan_mode", "vepa"), wantErr: "docker network create -o macvlan_mode"},
		{name: "network-only traffic class", in: opts("traffic_class", "106"), wantErr: "docker network create -o traffic_class"},
		{name: "unknown", in: opts("foo", "bar"), wantErr: `unknown option "foo": the only valid option for --network name=NET,driver-opt is mtu`},
		{name: "duplicate", in: opts("mtu", "1400", "mtu", "1300"), wantErr: "more than once"},
		{name: "control char", in: opts("mtu", "14\t00"), wantErr: "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEndpointOptions(tt.in)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestSplitVLAN(t *testing.T) {
	tests := []struct {
		in    string
		lower string
		id    int
		ok    bool
	}{
		{"eth0.10", "eth0", 10, true},
		{"ens2f0.4094", "ens2f0", 4094, true},
		{"a.b.7", "a.b", 7, true},
		{"eth0.0", "eth0", 0, true}, // syntactically a VLAN; the range check refuses it
		{"eth0.5000", "eth0", 5000, true},
		{"eth0", "", 0, false},
		{"eth0.", "", 0, false},
		{".10", "", 0, false},
		{"eth0.1a", "", 0, false},
	}
	for _, tt := range tests {
		lower, id, ok := splitVLAN(tt.in)
		if lower != tt.lower || id != tt.id || ok != tt.ok {
			t.Errorf("splitVLAN(%q) = %q, %d, %v; want %q, %d, %v", tt.in, lower, id, ok, tt.lower, tt.id, tt.ok)
		}
	}
}

func TestLinkName(t *testing.T) {
	id := "3f9a1c2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"
	got := LinkName(id)
	if got != "rmv3f9a1c2b4d5e" {
		t.Fatalf("LinkName = %q", got)
	}
	if len(got) > 15 {
		t.Fatalf("LinkName %q is longer than IFNAMSIZ-1", got)
	}
	if LinkName("abc") != "rmvabc" {
		t.Fatalf("short ID: %q", LinkName("abc"))
	}
	// Different IDs with the same first 12 characters collide: CreateEndpoint
	// refuses the second (tested with the driver).
	if LinkName(id) != LinkName(id[:12]+"ffff") {
		t.Fatal("expected the same name for the same 12-character prefix")
	}
}

func TestCheckID(t *testing.T) {
	for _, ok := range []string{"abc", "3f9a1c2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8", "ks4mtfxpvd4ti53grxp9ysknv"} {
		if err := checkID("network", ok); err != nil {
			t.Errorf("checkID(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../x", "a/b", "a b", strings.Repeat("a", 65), "abc\n", ".hidden"} {
		if err := checkID("network", bad); err == nil {
			t.Errorf("checkID(%q) accepted", bad)
		}
	}
}

func TestGatewayFor(t *testing.T) {
	subs := []Subnet{{Pool: "10.1.0.0/16", Gateway: "10.1.0.1/16"}, {Pool: "192.168.7.0/24", Gateway: "192.168.7.254/24"}}
	if gw := gatewayFor(subs, "192.168.7.5/24"); gw != "192.168.7.254" {
		t.Errorf("gateway = %q", gw)
	}
	if gw := gatewayFor(subs, "172.16.0.5/24"); gw != "" {
		t.Errorf("gateway for an address outside the pools = %q", gw)
	}
	if gw := gatewayFor([]Subnet{{Pool: "10.9.0.0/24"}}, "10.9.0.3/24"); gw != "" {
		t.Errorf("gateway of a pool without one = %q", gw)
	}
}
