package fabric_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric/fabrictest"
)

func TestIEEEGetRequest(t *testing.T) {
	got := fabric.IEEEGetRequest("ens1f0np0")
	want := []byte{0 /*AF_UNSPEC*/, 21 /*DCB_CMD_IEEE_GET*/, 0, 0, 0, 0, 1, 0 /*DCB_ATTR_IFNAME*/}
	binary.NativeEndian.PutUint16(want[4:], 4+10)
	want = append(want, "ens1f0np0\x00\x00\x00"...)
	if !bytes.Equal(got, want) {
		t.Errorf("request\n got %x\nwant %x", got, want)
	}
}

func TestParseIEEE(t *testing.T) {
	d, err := fabric.ParseIEEE(fabrictest.MLX5Reply(fabrictest.ReplyOpts{PFCEn: 1 << 3, Trust: []byte{5, 255}}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Netdev != "ens1f0np0" || d.DCBX != 0x0a {
		t.Errorf("netdev %q dcbx %#x", d.Netdev, d.DCBX)
	}
	if d.PFC == nil || d.PFC.Cap != 8 || d.PFC.Delay != 52000 || fmt.Sprint(d.PFC.EnabledPriorities()) != "[3]" ||
		d.PFC.Requests[3] != 17 || d.PFC.Indications[3] != 42 || d.PFC.Requests[2] != 0 {
		t.Errorf("PFC %+v", d.PFC)
	}
	if fmt.Sprint(d.PrioTC) != "[1 0 2 3 4 5 6 7]" {
		t.Errorf("prio_tc %v", d.PrioTC)
	}
	if len(d.DSCP) != 64 || d.DSCP[26] != 3 || d.DSCP[63] != 7 || d.DSCP[0] != 0 {
		t.Errorf("DSCP map %v", d.DSCP)
	}
	if strings.Join(d.Trust, ",") != "dscp,pcp" {
		t.Errorf("trust %v", d.Trust)
	}

	old, err := fabric.ParseIEEE(fabrictest.MLX5Reply(fabrictest.ReplyOpts{PFCEn: 1 << 3}))
	if err != nil || old.Trust != nil {
		t.Errorf("no trust table: %v %v", old.Trust, err)
	}
}

func TestParseIEEEMalformed(t *testing.T) {
	good := fabrictest.MLX5Reply(fabrictest.ReplyOpts{PFCEn: 8})
	short := append([]byte(nil), good[:40]...)
	binary.NativeEndian.PutUint16(short[20:], 4000) // the IEEE nest claims more than there is
	for name, body := range map[string][]byte{
		"no dcbmsg":          {0, 21},
		"another command":    append([]byte{0, 20, 0, 0}, good[4:]...),
		"attribute too long": short,
		"truncated PFC":      append([]byte{0, 21, 0, 0}, fabrictest.NLA(13, fabrictest.NLA(2, make([]byte, 100)))...),
		"truncated ETS":      append([]byte{0, 21, 0, 0}, fabrictest.NLA(13, fabrictest.NLA(1, make([]byte, 20)))...),
	} {
		if _, err := fabric.ParseIEEE(body); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRoCEMTU(t *testing.T) {
	for mtu, want := range map[int]int{
		9000: 4096, 4200: 4096, 4192: 4096, 4191: 2048, 2144: 2048, 2143: 1024,
		1500: 1024, 1120: 1024, 1119: 512, 608: 512, 607: 256, 352: 256, 351: 0, 68: 0,
	} {
		if got := fabric.RoCEMTU(mtu); got != want {
			t.Errorf("fabric.RoCEMTU(%d) = %d, want %d", mtu, got, want)
		}
	}
}
