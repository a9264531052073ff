package rdma_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func TestDeviceNodes(t *testing.T) {
	mixed := mixedHost(t)
	// Numbers are read, never computed: give uverbs0 a dynamic-looking one.
	custom := rdmatest.MLX5(t, rdmatest.MLX5Options{RdmaCM: "10:124"})
	if err := os.WriteFile(filepath.Join(custom, "sys/class/infiniband_verbs/uverbs0/dev"), []byte("240:7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noCM := rdmatest.MLX5(t, rdmatest.MLX5Options{NoRdmaCM: true})
	noVerbs := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	if err := os.Remove(filepath.Join(noVerbs, "sys/class/infiniband_verbs/uverbs0")); err != nil {
		t.Fatal(err)
	}

	uverbs0 := rdma.DeviceNode{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192, Type: "c"}
	tests := []struct {
		name    string
		root    string
		hca     string
		want    []rdma.DeviceNode
		wantErr error
	}{
		{name: "mlx5", root: mixed, hca: "mlx5_0", want: []rdma.DeviceNode{
			uverbs0,
			{Path: "/dev/infiniband/rdma_cm", Major: 10, Minor: 57, Type: "c"},
		}},
		{name: "rxe next to mlx5", root: mixed, hca: "rxe0", want: []rdma.DeviceNode{
			{Path: "/dev/infiniband/uverbs1", Major: 231, Minor: 193, Type: "c"},
			{Path: "/dev/infiniband/rdma_cm", Major: 10, Minor: 57, Type: "c"},
		}},
		{name: "numbers from dev files", root: custom, hca: "mlx5_0", want: []rdma.DeviceNode{
			{Path: "/dev/infiniband/uverbs0", Major: 240, Minor: 7, Type: "c"},
			{Path: "/dev/infiniband/rdma_cm", Major: 10, Minor: 124, Type: "c"},
		}},
		{name: "rdma_cm missing", root: noCM, hca: "mlx5_0", want: []rdma.DeviceNode{uverbs0}, wantErr: rdma.ErrNoRdmaCM},
		{name: "uverbs missing", root: noVerbs, hca: "mlx5_0", wantErr: rdma.ErrNoUverbs},
		{name: "unknown HCA", root: mixed, hca: "mlx5_7", wantErr: rdma.ErrNoUverbs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rdma.NewSysfs(tt.root).DeviceNodes(tt.hca)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("DeviceNodes(%s) error = %v, want %v", tt.hca, err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.hca) {
				t.Errorf("error %q does not name %s", err, tt.hca)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DeviceNodes(%s) = %+v, want %+v", tt.hca, got, tt.want)
			}
			for _, n := range got {
				if base := filepath.Base(n.Path); strings.HasPrefix(base, "umad") || strings.HasPrefix(base, "issm") {
					t.Errorf("management node %s passed to containers", n.Path)
				}
			}
		})
	}
}

func TestDeviceNodesMalformedDevFile(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	if err := os.WriteFile(filepath.Join(root, "sys/class/infiniband_verbs/uverbs0/dev"), []byte("231\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rdma.NewSysfs(root).DeviceNodes("mlx5_0"); err == nil || !strings.Contains(err.Error(), "uverbs0/dev") {
		t.Errorf("DeviceNodes with a malformed dev file: error = %v, want one naming the file", err)
	}
}
