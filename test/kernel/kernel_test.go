package main

import (
	"net"
	"testing"
)

// The readers that stand for the kernel's truth must themselves be right.

func TestGIDText(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"10.20.0.2", "0000:0000:0000:0000:0000:ffff:0a14:0002"},
		{"fd00:21::2", "fd00:0021:0000:0000:0000:0000:0000:0002"},
		{"fe80::5054:ff:fe12:3456", "fe80:0000:0000:0000:5054:00ff:fe12:3456"},
	} {
		if got := gidText(net.ParseIP(c.ip)); got != c.want {
			t.Errorf("gidText(%s) = %s, want %s", c.ip, got, c.want)
		}
	}
}

func TestLinkLocal(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	if got, want := linkLocal(mac), net.ParseIP("fe80::5054:ff:fe12:3456"); !got.Equal(want) {
		t.Errorf("linkLocal(%s) = %s, want %s", mac, got, want)
	}
}

func TestGIDLine(t *testing.T) {
	// As ibv_devinfo -v prints them (rdma-core 44).
	for _, c := range []struct {
		line, ip, typ string
		idx           string
	}{
		{"\t\t\tGID[  0]:\t\tfe80::7cd0:15ff:fe8f:f700, RoCE v2", "fe80::7cd0:15ff:fe8f:f700", "RoCE v2", "0"},
		{"\t\t\tGID[1023]:\t\t::ffff:10.20.0.2, RoCE v2", "::ffff:10.20.0.2", "RoCE v2", "1023"},
		{"\t\t\tGID[  1]:\t\tfd00:21::2, IB/RoCE v1", "fd00:21::2", "IB/RoCE v1", "1"},
	} {
		m := gidLine.FindStringSubmatch(c.line)
		if m == nil || m[1] != c.idx || m[2] != c.ip || m[3] != c.typ {
			t.Errorf("%q: got %q", c.line, m)
		}
	}
}

func TestParseDev(t *testing.T) {
	if ma, mi, err := parseDev("231:192"); err != nil || ma != 231 || mi != 192 {
		t.Errorf("parseDev(231:192) = %d, %d, %v", ma, mi, err)
	}
	for _, bad := range []string{"", "231", "a:b", "231:"} {
		if _, _, err := parseDev(bad); err == nil {
			t.Errorf("parseDev(%q) accepted", bad)
		}
	}
}
