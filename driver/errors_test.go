package driver

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// Each refusal is named for what was wrong, and a failure is no refusal:
// the daemon logs the first as a warning and the second as an error.
func TestErrorKinds(t *testing.T) {
	var (
		option   *InvalidOptionError
		request  *BadRequestError
		conflict *ConflictError
		host     *HostSetupError
		full     *TableFullError
	)
	tests := []struct {
		name string
		run  func(t *testing.T) error
		want any // pointer to a pointer of the kind; nil: not a refusal
	}{
		{"unknown option", func(t *testing.T) error {
			d := newTestDriver(t, drivertest.NewLinks("p0"), t.TempDir())
			return d.CreateNetwork(netReq("n1", "parent", "p0", "macvlan_mod", "bridge"))
		}, &option},
		{"MAC address", func(t *testing.T) error {
			d := oneNetwork(t, "bridge")
			_, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "e1", MAC: "01:00:5e:00:00:01"})
			return err
		}, &option},
		{"address from IPAM", func(t *testing.T) error {
			d := oneNetwork(t, "bridge")
			_, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "e1", IPv4: "10.5.0.2"})
			return err
		}, &request},
		{"sandbox key", func(t *testing.T) error {
			d := oneNetwork(t, "bridge")
			if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
				t.Fatal(err)
			}
			_, err := d.Join("n1", "e1", "relative/path")
			return err
		}, &request},
		{"endpoint under another network", func(t *testing.T) error {
			d := oneNetwork(t, "bridge")
			if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
				t.Fatal(err)
			}
			return d.DeleteEndpoint("n2", "e1")
		}, &request},
		{"network ID with other settings", func(t *testing.T) error {
			d := oneNetwork(t, "bridge")
			return d.CreateNetwork(netReq("n1", "parent", "p0", "macvlan_mode", "private"))
		}, &conflict},
		{"second container on passthru", func(t *testing.T) error {
			d := oneNetwork(t, "passthru")
			if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
				t.Fatal(err)
			}
			_, err := d.CreateEndpoint(ep("n1", "e2", "10.5.0.3/24"))
			return err
		}, &conflict},
		{"endpoint ID on another network", func(t *testing.T) error {
			links := drivertest.NewLinks("p0", "q0")
			d := newTestDriver(t, links, t.TempDir())
			for _, n := range [][2]string{{"n1", "p0"}, {"n2", "q0"}} {
				if err := d.CreateNetwork(netReq(n[0], "parent", n[1])); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
				t.Fatal(err)
			}
			_, err := d.CreateEndpoint(ep("n2", "e1", "10.5.0.2/24"))
			return err
		}, &conflict},
		{"parent without RDMA device", func(t *testing.T) error {
			root := buildRoot(t, func(r string) error {
				return rdmatest.AddNetdev(r, rdmatest.NetdevSpec{Name: "p0", MAC: "02:00:00:00:00:09"})
			})
			d := newTestDriverAt(t, drivertest.NewLinks("p0"), t.TempDir(), root)
			return d.CreateNetwork(netReq("n1", "parent", "p0"))
		}, &host},
		{"table full", func(t *testing.T) error {
			// 4 slots: the default pair and one container's pair.
			d := newTestDriverAt(t, drivertest.NewLinks("p0"), t.TempDir(), mlx5Root(t, rdmatest.MLX5Options{TableSize: 4}))
			if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateEndpoint(ep("n1", "e1", "10.5.0.2/24")); err != nil {
				t.Fatal(err)
			}
			_, err := d.CreateEndpoint(ep("n1", "e2", "10.5.0.3/24"))
			if errors.As(err, &full) && (full.HCA != "mlx5_0" || full.Port != 1 || full.Need != 2 || full.Free != 2 || full.Size != 4 || full.Held != 2 || full.Starting != 1) {
				t.Errorf("table full: %+v", *full)
			}
			return err
		}, &full},
		{"state not writable (a failure)", func(t *testing.T) error {
			dir := t.TempDir()
			d := newTestDriverAt(t, drivertest.NewLinks("p0"), dir, hosts(t, "p0"))
			netDir := filepath.Join(dir, networksDir)
			if err := os.RemoveAll(netDir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(netDir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return d.CreateNetwork(netReq("n1", "parent", "p0"))
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run(t)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want == nil {
				if IsRefusal(err) {
					t.Fatalf("failure %T %q is taken for a refusal", err, err)
				}
				return
			}
			if !IsRefusal(err) {
				t.Fatalf("%T %q is not a refusal", err, err)
			}
			if !errors.As(err, tt.want) {
				t.Fatalf("%T %q, want %T", err, err, tt.want)
			}
		})
	}
}

// oneNetwork is a driver with network n1 on p0 (an mlx5 port) in mode.
func oneNetwork(t *testing.T, mode string) testDriver {
	t.Helper()
	d := newTestDriverAt(t, drivertest.NewLinks("p0"), t.TempDir(), hosts(t, "p0"))
	if err := d.CreateNetwork(netReq("n1", "parent", "p0", "macvlan_mode", mode)); err != nil {
		t.Fatal(err)
	}
	return d
}
