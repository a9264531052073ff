package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// The fuzz targets of this file run as ordinary tests on their seed corpus,
// real option lists and state files in testdata/fuzz/<target>/, and are
// fuzzed by scripts/fuzz.sh.

// maxErrorText bounds an error shown to the user: it must name the offending
// option, not echo whatever was sent.
const maxErrorText = 1024

// fuzzOptions makes an option list of n%7 of the pairs kv holds: the fuzzer
// mutates each key and value on its own and may repeat keys.
func fuzzOptions(n uint8, kv ...string) []Option {
	pairs := int(n) % (len(kv)/2 + 1)
	out := make([]Option, 0, pairs)
	for i := 0; i < pairs; i++ {
		out = append(out, Option{Key: kv[2*i], Value: kv[2*i+1]})
	}
	return out
}

func hasControlChar(s string) bool { return strings.ContainsFunc(s, unicode.IsControl) }

// checkRefusal holds for every refusal of an option list: an
// InvalidOptionError whose text is short, printable and valid UTF-8, so that
// the docker CLI and the log show it as it is.
func checkRefusal(t *testing.T, in []Option, err error) {
	t.Helper()
	var inv *InvalidOptionError
	if !errors.As(err, &inv) {
		t.Fatalf("options %.200q: refusal %T %v is not an InvalidOptionError", in, err, err)
	}
	msg := err.Error()
	switch {
	case msg == "":
		t.Fatalf("options %.200q: empty error", in)
	case !utf8.ValidString(msg):
		t.Fatalf("options %.200q: error is not valid UTF-8: %q", in, msg)
	case hasControlChar(msg):
		t.Fatalf("options %.200q: error holds a control character: %q", in, msg)
	case len(msg) > maxErrorText:
		t.Fatalf("options %.200q: error is %d bytes long, more than %d: %.200q...", in, len(msg), maxErrorText, msg)
	}
}

// checkAccepted holds for every accepted option list: each key is one of
// valid, given once, with a non-empty value of at most maxOptionValue bytes
// and no control character.
func checkAccepted(t *testing.T, in []Option, valid []string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, o := range in {
		if !slices.Contains(valid, o.Key) {
			t.Fatalf("options %.200q: accepted unknown option %q", in, o.Key)
		}
		if _, dup := got[o.Key]; dup {
			t.Fatalf("options %.200q: accepted %q twice", in, o.Key)
		}
		if o.Value == "" || len(o.Value) > maxOptionValue || hasControlChar(o.Key) || hasControlChar(o.Value) {
			t.Fatalf("options %.200q: accepted %q=%q", in, o.Key, o.Value)
		}
		got[o.Key] = o.Value
	}
	return got
}

// kernelValidIfname is the kernel's dev_valid_name (net/core/dev.c) for
// ASCII: 1 to 15 bytes, not "." or "..", no '/', ':', white space or NUL.
// (The kernel's isspace also takes the Latin-1 byte 0xA0, which UTF-8 names
// may hold; such a name cannot exist, so looking it up only fails.)
func kernelValidIfname(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/: \t\n\v\f\r\x00")
}

func checkMTU(t *testing.T, in []Option, given string, mtu int) {
	t.Helper()
	if given == "" {
		if mtu != 0 {
			t.Fatalf("options %.200q: MTU %d without an mtu option", in, mtu)
		}
		return
	}
	if want, err := strconv.Atoi(given); err != nil || mtu != want || mtu < minMTU || mtu > maxMTU {
		t.Fatalf("options %.200q: mtu=%q accepted as %d", in, given, mtu)
	}
}

// FuzzParseNetworkOptions: ParseNetworkOptions never panics; what it
// accepts is a parent the kernel could name, a known mode, an MTU in range,
// a CDI-safe RDMA device name and no control character; what it refuses is
// refused with a short printable InvalidOptionError.
func FuzzParseNetworkOptions(f *testing.F) {
	f.Fuzz(func(t *testing.T, n uint8, k1, v1, k2, v2, k3, v3, k4, v4, k5, v5, k6, v6 string) {
		in := fuzzOptions(n, k1, v1, k2, v2, k3, v3, k4, v4, k5, v5, k6, v6)
		got, err := ParseNetworkOptions(in)
		again, err2 := ParseNetworkOptions(in)
		if again != got || (err == nil) != (err2 == nil) {
			t.Fatalf("options %.200q: two calls disagree: %+v %v, then %+v %v", in, got, err, again, err2)
		}
		if err != nil {
			checkRefusal(t, in, err)
			return
		}
		// The engine's own keys are ignored; its MTU key stands for mtu.
		own := slices.DeleteFunc(slices.Clone(in), func(o Option) bool {
			return strings.HasPrefix(o.Key, EngineOptionPrefix) && o.Key != OptEngineMTU
		})
		engineMTU := ""
		own = slices.DeleteFunc(own, func(o Option) bool {
			if o.Key == OptEngineMTU {
				engineMTU = o.Value
				return true
			}
			return false
		})
		given := checkAccepted(t, own, networkOptionNames)
		if engineMTU != "" {
			if given[api.OptMTU] != "" && given[api.OptMTU] != engineMTU {
				t.Fatalf("options %.200q: accepted two different MTUs", in)
			}
			given[api.OptMTU] = engineMTU
		}
		if !kernelValidIfname(got.Parent) || got.Parent != given[api.OptParent] {
			t.Fatalf("options %.200q: accepted parent %q", in, got.Parent)
		}
		if !slices.Contains(macvlanModeNames, got.Mode) || (given[api.OptMode] != "" && got.Mode != given[api.OptMode]) {
			t.Fatalf("options %.200q: accepted mode %q", in, got.Mode)
		}
		checkMTU(t, in, given[api.OptMTU], got.MTU)
		if got.RDMADevice != given[api.OptRDMADevice] {
			t.Fatalf("options %.200q: rdma_device %q, given %q", in, got.RDMADevice, given[api.OptRDMADevice])
		}
		if d := got.RDMADevice; d != "" && (d == "." || d == ".." || strings.ContainsAny(d, "/\x00") || !rdmaDeviceRE.MatchString(d)) {
			t.Fatalf("options %.200q: accepted rdma_device %q", in, d)
		}
		if got.GIDCheck != api.GIDCheckWarn && got.GIDCheck != api.GIDCheckStrict {
			t.Fatalf("options %.200q: gid_check %q", in, got.GIDCheck)
		}
	})
}

// FuzzParseEndpointOptions: ParseEndpointOptions never panics; apart from
// libnetwork's own labels it accepts only one mtu in range, and it refuses
// with a short printable InvalidOptionError.
func FuzzParseEndpointOptions(f *testing.F) {
	f.Fuzz(func(t *testing.T, n uint8, k1, v1, k2, v2, k3, v3, k4, v4, k5, v5, k6, v6 string) {
		in := fuzzOptions(n, k1, v1, k2, v2, k3, v3, k4, v4, k5, v5, k6, v6)
		got, err := ParseEndpointOptions(in)
		if err != nil {
			checkRefusal(t, in, err)
			return
		}
		own := slices.DeleteFunc(slices.Clone(in), func(o Option) bool { return IsLibnetworkLabel(o.Key) })
		given := checkAccepted(t, own, endpointOptionNames)
		checkMTU(t, in, given[api.OptMTU], got.MTU)
	})
}

// IDs of the state-loading fixture: a good network, a good endpoint on it,
// and the one whose file the fuzzer writes.
var (
	fuzzGoodNet = "6000" + strings.Repeat("0", 60)
	fuzzGoodEP  = "e000" + strings.Repeat("0", 60)
	fuzzID      = "c0ffee" + strings.Repeat("0", 58)
	// fuzzOrphanEP has a link of the instance but no record.
	fuzzOrphanEP = "0bad" + strings.Repeat("0", 60)
)

func fuzzGoodRecords() (*network, *endpoint) {
	n := &network{ID: fuzzGoodNet, Parent: "p0", Mode: api.ModeBridge, MTU: 1500, GIDCheck: api.GIDCheckWarn,
		// The identity of the fixture's mlx5_0: restore records it.
		RDMA: &networkRDMA{HCA: "mlx5_0", Port: 1, Netdev: "p0", CDIName: "mlx5_0", NodeGUID: "a088:c203:005b:0300", PCI: "0000:03:00.0"},
		IPv4: []Subnet{{Pool: "10.9.0.0/24", Gateway: "10.9.0.1/24"}}, Options: map[string]string{"parent": "p0", "mtu": "1500"},
		Created: time.Unix(1700000000, 0).UTC()}
	e := &endpoint{ID: fuzzGoodEP, NetworkID: fuzzGoodNet, Ifname: LinkName(fuzzGoodEP), Parent: "p0", Mode: api.ModeBridge,
		MTU: 1500, MAC: "02:42:0a:09:00:02", IPv4: "10.9.0.2/24", GIDNeed: 2, Created: time.Unix(1700000001, 0).UTC()}
	return n, e
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// dirNames lists dir's entries, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// FuzzStateLoad writes arbitrary bytes as one network's or one endpoint's
// state file beside a good network and a good endpoint, then starts the
// driver on that directory. New never fails as a whole and never panics or
// hangs; the file is either loaded under its own ID or renamed *.corrupt
// with its bytes intact; the good records load unchanged, the good
// endpoint's link (which carries the instance's owner alias, as the links
// the daemon makes do) survives the orphan sweep while an orphan link of
// the same instance goes, and nothing but state files and the HCA's CDI
// spec is written.
func FuzzStateLoad(f *testing.F) {
	sysfs := f.TempDir()
	for i, nd := range []string{"p0", "p1"} {
		o := rdmatest.MLX5Options{HCA: fmt.Sprintf("mlx5_%d", i), Netdev: nd, Uverbs: i,
			PCIAddr: fmt.Sprintf("0000:%02x:00.0", 3+i), MAC: fmt.Sprintf("a0:88:c2:5b:03:%02x", i)}
		if err := rdmatest.BuildMLX5(sysfs, o); err != nil {
			f.Fatal(err)
		}
	}
	goodNet, goodEP := fuzzGoodRecords()
	netData := mustJSON(f, networkRecord{Version: stateVersion, Network: goodNet})
	epData := mustJSON(f, endpointRecord{Version: stateVersion, Endpoint: goodEP})
	// The instance every run starts as: the links it made carry its owner
	// alias, so that the orphan sweep considers (and must keep) the good
	// endpoint's link and delete an orphan of the same instance.
	instanceDir := f.TempDir()
	d0, err := New(Config{StateDir: instanceDir, Links: drivertest.NewLinks(), Log: quietLog(), Sysfs: rdma.NewSysfs(sysfs), CDIDir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	owner := d0.owner
	d0.Close()
	instance, err := os.ReadFile(filepath.Join(instanceDir, "instance"))
	if err != nil {
		f.Fatal(err)
	}
	orphan := LinkName(fuzzOrphanEP)

	f.Fuzz(func(t *testing.T, endpoint bool, data []byte) {
		base := t.TempDir()
		stateDir, cdiDir := filepath.Join(base, "state"), filepath.Join(base, "cdi")
		for _, d := range []string{networksDir, endpointsDir} {
			if err := os.MkdirAll(filepath.Join(stateDir, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		write := func(sub, id string, b []byte) {
			if err := os.WriteFile(filepath.Join(stateDir, sub, id+".json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(stateDir, "instance"), instance, 0o600); err != nil {
			t.Fatal(err)
		}
		write(networksDir, fuzzGoodNet, netData)
		write(endpointsDir, fuzzGoodEP, epData)
		sub := networksDir
		if endpoint {
			sub = endpointsDir
		}
		write(sub, fuzzID, data)
		links := drivertest.NewLinks("p0", "p1")
		p0, _ := links.LinkByName("p0")
		for _, name := range []string{goodEP.Ifname, orphan} {
			links.Add(netns.Link{Name: name, Kind: "macvlan", EncapType: "ether", MTU: 1500, ParentIndex: p0.Index, MacvlanMode: api.ModeBridge, Alias: owner})
		}

		type result struct {
			d   *Driver
			err error
		}
		done := make(chan result, 1)
		go func() {
			d, err := New(Config{StateDir: stateDir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(sysfs), CDIDir: cdiDir,
				GIDTimeout: 50 * time.Millisecond, GIDPoll: 5 * time.Millisecond})
			done <- result{d, err}
		}()
		var d *Driver
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("New failed as a whole on a bad %s file: %v", sub, r.err)
			}
			d = r.d
		case <-time.After(10 * time.Second):
			t.Fatalf("New did not return within 10s on a bad %s file", sub)
		}

		d.mu.Lock()
		gotNet, gotEP := d.networks[fuzzGoodNet], d.endpoints[fuzzGoodEP]
		okNet, okEP := gotNet != nil && reflect.DeepEqual(*gotNet.network, *goodNet), gotEP != nil && reflect.DeepEqual(gotEP.endpoint, *goodEP)
		var loaded bool
		if endpoint {
			_, loaded = d.endpoints[fuzzID]
		} else {
			_, loaded = d.networks[fuzzID]
		}
		nets, eps := len(d.networks), len(d.endpoints)
		// The fuzzed record may claim the orphan's link for itself.
		claimed := false
		for _, e := range d.endpoints {
			claimed = claimed || e.Ifname == orphan
		}
		d.mu.Unlock()
		if !okNet || !okEP {
			t.Fatalf("good records not loaded as written beside a bad %s file: network %+v, endpoint %+v", sub, gotNet, gotEP)
		}
		if want := 2; nets+eps != want+btoi(loaded) {
			t.Fatalf("%d networks and %d endpoints loaded, want the good two and %d more", nets, eps, btoi(loaded))
		}
		if st := d.Status(); len(st.Networks) == 0 {
			t.Fatalf("status lists no network: %+v", st)
		}
		if !links.Has(goodEP.Ifname) {
			t.Fatalf("link %s of the good endpoint deleted at start; links: %v", goodEP.Ifname, links.Names())
		}
		if !claimed && links.Has(orphan) {
			t.Fatalf("orphan link %s of this instance, which no endpoint claims, survived the start; links: %v", orphan, links.Names())
		}
		d.Close() // waits for GID watches, which may rewrite the endpoint file

		name := fuzzID + ".json"
		want := []string{name}
		// A joined endpoint whose link is in no namespace (its container
		// went while the daemon was down) is collected: its file goes.
		var rec endpointRecord
		_, asideErr := os.Stat(filepath.Join(stateDir, sub, name+corruptExt))
		_, fileErr := os.Stat(filepath.Join(stateDir, sub, name))
		collected := endpoint && !loaded && errors.Is(asideErr, os.ErrNotExist) && errors.Is(fileErr, os.ErrNotExist) &&
			json.Unmarshal(data, &rec) == nil && rec.Endpoint != nil && rec.Endpoint.Sandbox != "" && !links.Has(rec.Endpoint.Ifname)
		switch {
		case collected:
			want = nil
		case !loaded:
			want = []string{name + corruptExt}
			aside, err := os.ReadFile(filepath.Join(stateDir, sub, name+corruptExt))
			if err != nil || !bytes.Equal(aside, data) {
				t.Fatalf("bad %s file not set aside intact: %v", sub, err)
			}
		}
		goodName := fuzzGoodNet + ".json"
		if endpoint {
			goodName = fuzzGoodEP + ".json"
		}
		want = append(want, goodName)
		slices.Sort(want)
		if got := dirNames(t, filepath.Join(stateDir, sub)); !slices.Equal(got, want) {
			t.Fatalf("%s holds %v, want %v", sub, got, want)
		}
		if got := dirNames(t, stateDir); !slices.Equal(got, []string{endpointsDir, "instance", "lock", networksDir}) {
			t.Fatalf("state directory holds %v", got)
		}
		if got := dirNames(t, base); !slices.Equal(got, []string{"cdi", "state"}) {
			t.Fatalf("files written beside the state and CDI directories: %v", got)
		}
		for _, c := range dirNames(t, cdiDir) {
			if c != "rdma-macvlan-mlx5_0.json" && c != "rdma-macvlan-mlx5_1.json" {
				t.Fatalf("CDI directory holds %q", c)
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
