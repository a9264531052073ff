package commands

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

func TestBar(t *testing.T) {
	tests := []struct {
		used, size int
		want       string
	}{
		{0, 255, "[..........]"},
		{1, 255, "[#.........]"},
		{8, 255, "[#.........]"},
		{26, 255, "[#.........]"},
		{38, 255, "[#.........]"},
		{39, 255, "[##........]"},
		{128, 256, "[#####.....]"},
		{250, 255, "[#########.]"},
		{254, 255, "[#########.]"},
		{255, 255, "[##########]"},
		{300, 255, "[##########]"},
		{1, 1024, "[#.........]"},
		{0, 0, "[??????????]"},
	}
	for _, tt := range tests {
		if got := bar(tt.used, tt.size); got != tt.want {
			t.Errorf("bar(%d, %d) = %q, want %q", tt.used, tt.size, got, tt.want)
		}
	}
}

func TestLsTable(t *testing.T) {
	w := standardWorld(t)
	if rc := w.run("ls"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	out := w.stdout.String()
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 {
		t.Fatalf("too few lines:\n%s", out)
	}
	head := strings.Fields(lines[0])
	if strings.Join(head, " ") != "NAME DRIVER PARENT HCA PORT STATE CONTAINERS GID TABLE QOS DEVICE FLAGS" {
		t.Errorf("header %q", lines[0])
	}
	wantRows := []string{
		"roce rdma-macvlan:latest ens3np0 mlx5_0 1 ACTIVE 2 [#.........] 8/255 tc=106,sl=3 --device /dev/infiniband/uverbs0 --device /dev/infiniband/rdma_cm",
		"roce2 rdma-macvlan:latest ens4np0 mlx5_1 1 DOWN 0 [#########.] 250/255 sl=5 --device /dev/infiniband/uverbs1 --device /dev/infiniband/rdma_cm",
	}
	for i, want := range wantRows {
		if got := strings.Join(strings.Fields(lines[1+i]), " "); got != want {
			t.Errorf("row %d:\n  %q\nwant\n  %q", i, got, want)
		}
	}
	// The columns line up: each row's GID TABLE starts where the header's does.
	col := strings.Index(lines[0], "GID TABLE")
	for _, l := range lines[1:3] {
		if len(l) <= col || l[col] != '[' {
			t.Errorf("GID TABLE column not aligned at %d in %q", col, l)
		}
	}
	if !strings.Contains(out, "roce2: problem: GID table of mlx5_1 port 1 is nearly full") {
		t.Errorf("the daemon's problem is not shown:\n%s", out)
	}
	if strings.Contains(out, "plain") {
		t.Errorf("the bridge network is listed:\n%s", out)
	}
}

func TestLsCDIAndJSON(t *testing.T) {
	dir := t.TempDir()
	writeCDISpec(t, dir, "mlx5_0")
	w := standardWorld(t, dir)
	if rc := w.run("ls", "--format", "json"); rc != 0 {
		t.Fatalf("status %d, stderr:\n%s", rc, w.stderr.String())
	}
	var got lsOutput
	if err := json.Unmarshal(w.stdout.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, w.stdout.String())
	}
	if len(got.Networks) != 2 {
		t.Fatalf("%d networks, want 2:\n%s", len(got.Networks), w.stdout.String())
	}
	n := got.Networks[0]
	want := lsNetwork{
		Name: "roce", ID: netRoce, Driver: "rdma-macvlan:latest", Parent: "ens3np0", Containers: 2,
		netFacts: netFacts{HCA: "mlx5_0", Port: 1, PortState: "ACTIVE", LinkLayer: "Ethernet", NetnsMode: "shared", Source: "daemon",
			GIDTable: &api.GIDTable{Size: 255, Used: 8, Free: 247}, CDIDevice: "rdma-macvlan/hca=mlx5_0"},
	}
	if n.Name != want.Name || n.ID != want.ID || n.Driver != want.Driver || n.Parent != want.Parent || n.HCA != want.HCA ||
		n.Port != want.Port || n.PortState != want.PortState || n.LinkLayer != want.LinkLayer || n.NetnsMode != want.NetnsMode ||
		n.Containers != want.Containers || n.Source != want.Source || *n.GIDTable != *want.GIDTable || n.CDIDevice != want.CDIDevice {
		t.Errorf("network = %+v\nwant %+v", n, want)
	}
	// mlx5_0 has a spec in the engine's CDI dir, mlx5_1 has none.
	if strings.Join(n.DeviceFlags, " ") != "--device rdma-macvlan/hca=mlx5_0" {
		t.Errorf("device flags of roce = %q", n.DeviceFlags)
	}
	if strings.Join(got.Networks[1].DeviceFlags, " ") != "--device /dev/infiniband/uverbs1 --device /dev/infiniband/rdma_cm" {
		t.Errorf("device flags of roce2 = %q", got.Networks[1].DeviceFlags)
	}
}

func TestLsPluginProblems(t *testing.T) {
	w := standardWorld(t)
	w.plugins = nil
	w.plugin("rdma-macvlan:latest", pluginID, false, nil)
	if rc := w.run("ls"); rc != 0 {
		t.Fatalf("status %d", rc)
	}
	if !strings.Contains(w.stdout.String(), "roce: problem: rdma-macvlan plugin disabled") {
		t.Errorf("disabled plugin not shown:\n%s", w.stdout.String())
	}
}

func TestLsEmpty(t *testing.T) {
	w := newWorld(t)
	w.info("20.10.24")
	if rc := w.run("ls", "--format=json"); rc != 0 {
		t.Fatalf("status %d", rc)
	}
	if strings.TrimSpace(w.stdout.String()) != `{
  "networks": []
}` {
		t.Errorf("got %s", w.stdout.String())
	}
	if rc := w.run("ls"); rc != 0 || !strings.Contains(w.stderr.String(), "no rdma-macvlan networks") {
		t.Errorf("status %d, stderr %q", rc, w.stderr.String())
	}
	if rc := w.run("ls", "--format", "yaml"); rc != exitUsage {
		t.Errorf("--format yaml: status %d", rc)
	}
}

// TestLsQuotesDeviceFlags: device flags come from the daemon's status and
// the CDI spec; the table prints them ready to paste into a shell, so each
// argument that a shell would split or interpret is quoted.
func TestLsQuotesDeviceFlags(t *testing.T) {
	var buf bytes.Buffer
	renderLs(&buf, lsOutput{Networks: []lsNetwork{{Name: "roce", Driver: "rdma-macvlan:latest", Parent: "p0",
		DeviceFlags: []string{"--device", "rdma-macvlan/hca=x; touch /tmp/pwned", "--device", "/dev/infini band/uverbs0", "--device", "/dev/infiniband/rdma_cm"}}}})
	want := `--device 'rdma-macvlan/hca=x; touch /tmp/pwned' --device '/dev/infini band/uverbs0' --device /dev/infiniband/rdma_cm`
	if !strings.Contains(buf.String(), want) {
		t.Errorf("device flags not quoted for a shell:\n%s\nwant them as\n%s", buf.String(), want)
	}
}
