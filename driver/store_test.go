package driver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
	"golang.org/x/sys/unix"
)

func testNetwork(id string) *network {
	return &network{ID: id, Parent: "p0", Mode: api.ModeBridge, MTU: 1500, Created: time.Unix(1700000000, 0).UTC(),
		IPv4: []Subnet{{Pool: "10.9.0.0/24", Gateway: "10.9.0.1/24"}}}
}

func testEndpoint(id, nid string) *endpoint {
	return &endpoint{ID: id, NetworkID: nid, Ifname: LinkName(id), Parent: "p0", Mode: api.ModeBridge, MTU: 1500,
		MAC: "02:42:0a:09:00:02", IPv4: "10.9.0.2/24", Created: time.Unix(1700000000, 0).UTC()}
}

func openTestStore(t *testing.T, dir string) *store {
	t.Helper()
	s, err := openStore(dir)
	if err != nil {
		t.Fatalf("openStore: %v", err)
	}
	t.Cleanup(s.close)
	return s
}

func TestStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	n := testNetwork("aaaa")
	e := testEndpoint("eeee1111", "aaaa")
	if err := s.saveNetwork(n); err != nil {
		t.Fatal(err)
	}
	if err := s.saveEndpoint(e); err != nil {
		t.Fatal(err)
	}
	nets, eps, problems, err := s.load()
	if err != nil || len(problems) != 0 {
		t.Fatalf("load: %v %v", err, problems)
	}
	if len(nets) != 1 || nets[0].ID != "aaaa" || nets[0].IPv4[0].Gateway != "10.9.0.1/24" || !nets[0].Created.Equal(n.Created) {
		t.Fatalf("networks = %+v", nets)
	}
	if len(eps) != 1 || !reflect.DeepEqual(eps[0], e) {
		t.Fatalf("endpoints = %+v, want %+v", eps[0], e)
	}
	// Files are private and no temporary file is left.
	fi, err := os.Stat(s.networkPath("aaaa"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode: %v %v", fi, err)
	}
	assertNoTemp(t, dir)

	if err := s.deleteEndpoint(e.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.deleteEndpoint(e.ID); err != nil {
		t.Fatalf("second delete is not idempotent: %v", err)
	}
	_, eps, _, _ = s.load()
	if len(eps) != 0 {
		t.Fatalf("endpoint still loaded after delete: %+v", eps)
	}
}

func TestStoreAtomicReplace(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	if err := s.saveNetwork(testNetwork("aaaa")); err != nil {
		t.Fatal(err)
	}
	n2 := testNetwork("aaaa")
	n2.MTU = 9000
	if err := s.saveNetwork(n2); err != nil {
		t.Fatal(err)
	}
	nets, _, _, _ := s.load()
	if len(nets) != 1 || nets[0].MTU != 9000 {
		t.Fatalf("replace did not take: %+v", nets)
	}
	assertNoTemp(t, dir)
}

// A write that fails leaves the old version as it was and no temporary
// file. As root (CI) the state directory is a tmpfs of 256 KiB filled up, so
// the write fails with ENOSPC as on a full disk; as another user the
// directory is made read-only (root ignores the mode bits).
func TestStoreFailedWriteKeepsOld(t *testing.T) {
	dir := t.TempDir()
	var fill string
	if os.Geteuid() == 0 {
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
			t.Fatalf("mount a small tmpfs on %s: %v", dir, err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
		fill = filepath.Join(dir, "fill")
	}
	s := openTestStore(t, dir)
	n := testNetwork("aaaa")
	if err := s.saveNetwork(n); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(s.networkPath("aaaa"))
	if err != nil {
		t.Fatal(err)
	}
	netDir := filepath.Join(dir, networksDir)
	if fill != "" {
		fillUp(t, fill)
	} else {
		if err := os.Chmod(netDir, 0o500); err != nil {
			t.Fatal(err)
		}
	}
	n2 := testNetwork("aaaa")
	n2.MTU = 9000
	n2.IPv4 = append(n2.IPv4, Subnet{Pool: "10.10.0.0/24", Gateway: "10.10.0.1/24"})
	err = s.saveNetwork(n2)
	if fill != "" && !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("save on a full file system: %v, want ENOSPC", err)
	}
	if err == nil {
		t.Fatal("save into a read-only directory succeeded")
	}
	if after, err := os.ReadFile(s.networkPath("aaaa")); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("old version changed by a failed write: %v\n%s", err, after)
	}
	assertNoTemp(t, dir)
	if fill != "" {
		if err := os.Remove(fill); err != nil {
			t.Fatal(err)
		}
	} else if err := os.Chmod(netDir, 0o700); err != nil {
		t.Fatal(err)
	}
	nets, _, _, _ := s.load()
	if len(nets) != 1 || nets[0].MTU != 1500 {
		t.Fatalf("old version damaged: %+v", nets)
	}
	if err := s.saveNetwork(n2); err != nil {
		t.Fatalf("save once there is room again: %v", err)
	}
}

// fillUp writes path until its file system is full.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
}

func TestStoreTornFileDoesNotStopOthers(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	for _, id := range []string{"good1", "torn", "good2"} {
		if err := s.saveNetwork(testNetwork(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.saveEndpoint(testEndpoint("ep1", "torn")); err != nil {
		t.Fatal(err)
	}
	// Tear one file in half, leave a crashed write's temp file, plant garbage,
	// a record from the future and a record under the wrong name.
	data, _ := os.ReadFile(s.networkPath("torn"))
	if err := os.WriteFile(s.networkPath("torn"), data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, networksDir, ".good1.json.tmp-123")
	if err := os.WriteFile(tmp, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, endpointsDir, "garbage.json"), []byte("\x00\x01binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, networksDir, "future.json"), []byte(`{"version":99,"network":{"id":"future"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, networksDir, "renamed.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}

	nets, eps, problems, err := s.load()
	if err != nil {
		t.Fatalf("load failed as a whole: %v", err)
	}
	var ids []string
	for _, n := range nets {
		ids = append(ids, n.ID)
	}
	if strings.Join(slices.Sorted(slices.Values(ids)), ",") != "good1,good2" {
		t.Fatalf("loaded networks %v, want good1,good2", ids)
	}
	if len(eps) != 1 || eps[0].ID != "ep1" {
		t.Fatalf("endpoint of the torn network not kept: %+v", eps)
	}
	if len(problems) != 4 {
		t.Fatalf("problems = %+v, want 4 (torn, garbage, future, renamed)", problems)
	}
	for _, p := range problems {
		if !strings.HasSuffix(p.Path, corruptExt) {
			t.Errorf("problem file %s not set aside", p.Path)
		}
		if _, err := os.Stat(p.Path); err != nil {
			t.Errorf("set-aside file lost: %v", err)
		}
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("temp file of a crashed write not removed: %v", err)
	}
	// A second load sees only the good files and reports nothing new.
	_, _, problems, _ = s.load()
	if len(problems) != 0 {
		t.Fatalf("set-aside files reported again: %+v", problems)
	}
}

func TestStoreLockedAgainstSecondDaemon(t *testing.T) {
	dir := t.TempDir()
	openTestStore(t, dir)
	if _, err := openStore(dir); err == nil || !strings.Contains(err.Error(), "in use by another rdma-macvlan daemon") {
		t.Fatalf("second open: %v", err)
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		if atomicfile.IsTemp(filepath.Base(p)) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}
