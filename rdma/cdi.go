package rdma

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
)

const (
	// CDIVersion is the CDI spec version written. Every field used here
	// (deviceNodes with path/type/major/minor/fileMode/permissions, env)
	// exists since 0.3.0; 0.5.0 is the first that also accepts device names
	// starting with a digit, which HCA names may (rdma link add NAME ...).
	// The CDI library accepts 0.5.0 both in Docker 25's vendored copy
	// (v0.6.x: 0.1.0-0.6.0) and in Docker 28/29's (v0.8+/v1: up to 0.7.0+),
	// and rejects a spec declaring a version lower than its features need.
	CDIVersion = "0.5.0"
	// CDIKind is the vendor/class of the devices this plugin publishes.
	CDIKind = "rdma-macvlan/hca"

	cdiFilePrefix = "rdma-macvlan-"
	// cdiFileMode matches the host nodes (rdma-core's udev rules make
	// uverbs* and rdma_cm 0666), so non-root container users can open them.
	cdiFileMode fs.FileMode = 0o666
)

// CDIDevice is what the spec of one HCA says.
type CDIDevice struct {
	HCA   string
	Port  int
	Nodes []DeviceNode
	// Netdev is the host netdev of the HCA port (the parent with any VLAN
	// resolved); optional, exported as RDMA_MACVLAN_NETDEV.
	Netdev string
}

// CDISpec is the subset of the CDI spec format written here.
type CDISpec struct {
	Version string          `json:"cdiVersion"`
	Kind    string          `json:"kind"`
	Devices []CDISpecDevice `json:"devices"`
}

// CDISpecDevice is one device of a CDISpec.
type CDISpecDevice struct {
	Name           string            `json:"name"`
	ContainerEdits CDIContainerEdits `json:"containerEdits"`
}

// CDIContainerEdits are the edits a CDI device makes to a container.
type CDIContainerEdits struct {
	Env         []string        `json:"env,omitempty"`
	DeviceNodes []CDIDeviceNode `json:"deviceNodes,omitempty"`
}

// CDIDeviceNode is a device node edit.
type CDIDeviceNode struct {
	Path        string       `json:"path"`
	Type        string       `json:"type,omitempty"`
	Major       int64        `json:"major,omitempty"`
	Minor       int64        `json:"minor,omitempty"`
	FileMode    *fs.FileMode `json:"fileMode,omitempty"`
	Permissions string       `json:"permissions,omitempty"`
}

// CDIDeviceName is the fully qualified CDI name of an HCA's device, as
// given to docker run --device: "rdma-macvlan/hca=<hca>".
func CDIDeviceName(hca string) string { return CDIKind + "=" + hca }

// CDISpecPath is where WriteCDISpec puts the spec of hca.
func CDISpecPath(dir, hca string) string {
	return filepath.Join(dir, cdiFilePrefix+hca+".json")
}

// CDISpecHCAs lists the HCAs that have a spec written by WriteCDISpec in dir.
func CDISpecHCAs(dir string) ([]string, error) {
	paths, err := filepath.Glob(CDISpecPath(dir, "*"))
	if err != nil {
		return nil, fmt.Errorf("list CDI specs in %s: %w", dir, err)
	}
	hcas := make([]string, 0, len(paths))
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), cdiFilePrefix), ".json")
		if checkCDIName(name) == nil {
			hcas = append(hcas, name)
		}
	}
	return hcas, nil
}

// NewCDISpec builds the spec of one HCA: its device nodes, readable and
// writable, and the env RDMA software reads to pick the device and port.
func NewCDISpec(d CDIDevice) (CDISpec, error) {
	if err := checkCDIName(d.HCA); err != nil {
		return CDISpec{}, err
	}
	if d.Port < 1 {
		return CDISpec{}, fmt.Errorf("CDI spec for RDMA device %s: port %d is not a port number", d.HCA, d.Port)
	}
	if len(d.Nodes) == 0 {
		return CDISpec{}, fmt.Errorf("CDI spec for RDMA device %s: %w", d.HCA, ErrNoUverbs)
	}
	hcaPort := d.HCA + ":" + strconv.Itoa(d.Port)
	env := []string{
		// "=" makes NCCL match the name exactly (mlx5_1 must not match mlx5_10).
		"NCCL_IB_HCA==" + hcaPort,
		"UCX_NET_DEVICES=" + hcaPort,
		"RDMA_MACVLAN_HCA=" + d.HCA,
		"RDMA_MACVLAN_PORT=" + strconv.Itoa(d.Port),
	}
	if d.Netdev != "" {
		env = append(env, "RDMA_MACVLAN_NETDEV="+d.Netdev)
	}
	mode := cdiFileMode
	nodes := make([]CDIDeviceNode, 0, len(d.Nodes))
	for _, n := range d.Nodes {
		typ := n.Type
		if typ == "" {
			typ = "c"
		}
		nodes = append(nodes, CDIDeviceNode{
			Path:        n.Path,
			Type:        typ,
			Major:       int64(n.Major),
			Minor:       int64(n.Minor),
			FileMode:    &mode,
			Permissions: "rw",
		})
	}
	return CDISpec{
		Version: CDIVersion,
		Kind:    CDIKind,
		Devices: []CDISpecDevice{{
			Name:           d.HCA,
			ContainerEdits: CDIContainerEdits{Env: env, DeviceNodes: nodes},
		}},
	}, nil
}

// WriteCDISpec writes the CDI spec of one HCA to dir/rdma-macvlan-<hca>.json
// (mode 0644), atomically: a reader (dockerd watches the directory) sees
// the old file or the new one, never a part. The temporary file's name does
// not end in .json, so CDI caches ignore it.
func WriteCDISpec(dir string, d CDIDevice) (path string, err error) {
	spec, err := NewCDISpec(d)
	if err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode CDI spec for RDMA device %s: %w", d.HCA, err)
	}
	data = append(data, '\n')
	path = CDISpecPath(dir, d.HCA)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write CDI spec %s: %w (check --cdi-dir)", path, err)
	}
	// A spec in place whose directory fsync failed is done: the daemon
	// rewrites its specs at every start, so a crash that undoes it is
	// repaired then.
	if err := atomicfile.Write(path, data, 0o644, nil); err != nil && !notDurable(err) {
		return "", fmt.Errorf("write CDI spec %s: %w (check --cdi-dir)", path, err)
	}
	return path, nil
}

func notDurable(err error) bool {
	var nd *atomicfile.NotDurableError
	return errors.As(err, &nd)
}

// RemoveCDISpec removes the spec of hca and any temporary file a crash left
// behind. Removing a spec that does not exist succeeds.
func RemoveCDISpec(dir, hca string) error {
	if err := checkCDIName(hca); err != nil {
		return err
	}
	path := CDISpecPath(dir, hca)
	// Not durable is done too: specs no network uses are removed at start.
	if err := atomicfile.Remove(path); err != nil && !notDurable(err) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}

func checkCDIName(hca string) error {
	if err := checkName("RDMA device", hca); err != nil {
		return err
	}
	last := len(hca) - 1
	for i, r := range hca {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if alnum || i > 0 && i < last && (r == '_' || r == '-' || r == '.' || r == ':') {
			continue
		}
		return fmt.Errorf("RDMA device name %q cannot be a CDI device name (letters, digits, _ - . :): %w", hca, ErrInvalidName)
	}
	return nil
}
