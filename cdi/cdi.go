// Package cdi is the Container Device Interface spec format of the
// devices rdma-macvlan publishes: one spec file per HCA port, its device
// names, its path in a CDI directory, and reading, writing and removing
// those files. The daemon writes the specs; docker rdma reads them. The RDMA
// facts a spec holds come from package rdma.
package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
	"github.com/rdma-macvlan/rdma-macvlan/internal/safefile"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

const (
	// Version is the CDI spec version written. deviceNodes (path, type,
	// major, minor, fileMode, permissions) and env exist since 0.3.0; 0.5.0
	// accepts device names starting with a digit, which HCA names may (rdma
	// link add NAME ...); 0.6.0 adds the spec-level annotations that carry
	// the owner mark. The CDI library accepts 0.6.0 both in Docker 25's
	// vendored copy (v0.6.x: 0.1.0-0.6.0) and in Docker 28/29's (v0.8+/v1:
	// up to 0.7.0+), and rejects a spec declaring a version lower than its
	// features need.
	Version = "0.6.0"
	// Kind is the vendor/class of the devices this plugin publishes.
	Kind = api.CDIKind

	// OwnerAnnotation is the spec annotation that names the daemon
	// instance that wrote the spec (the same mark its links carry as their
	// ifalias): a daemon replaces or removes only specs with its own mark.
	OwnerAnnotation = "rdma-macvlan/owner"

	cdiFilePrefix = "rdma-macvlan-"
	// cdiFileMode matches the host nodes (rdma-core's udev rules make
	// uverbs* and rdma_cm 0666), so non-root container users can open them.
	cdiFileMode fs.FileMode = 0o666
)

// Device is what the spec of one HCA port says.
type Device struct {
	// Name is the CDI device name (Name); "" means HCA.
	Name  string
	HCA   string
	Port  int
	Nodes []rdma.DeviceNode
	// Owner is the mark of the daemon instance writing the spec, recorded
	// under OwnerAnnotation; "" writes no mark.
	Owner string
	// Netdev is the host netdev of the HCA port (the parent with any VLAN
	// resolved); optional, exported as RDMA_MACVLAN_NETDEV_<key>.
	Netdev string
	// TrafficClass and ServiceLevel are the QoS the networks on the port
	// ask for, when they all ask for the same; nil exports nothing.
	// Exported as RDMA_MACVLAN_TRAFFIC_CLASS_<key> and
	// RDMA_MACVLAN_SERVICE_LEVEL_<key>.
	TrafficClass, ServiceLevel *int
}

// Spec is the subset of the CDI spec format written here.
type Spec struct {
	Version     string            `json:"cdiVersion"`
	Kind        string            `json:"kind"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Devices     []SpecDevice      `json:"devices"`
}

// SpecDevice is one device of a Spec.
type SpecDevice struct {
	Name           string         `json:"name"`
	ContainerEdits ContainerEdits `json:"containerEdits"`
}

// ContainerEdits are the edits a CDI device makes to a container.
type ContainerEdits struct {
	Env         []string     `json:"env,omitempty"`
	DeviceNodes []DeviceNode `json:"deviceNodes,omitempty"`
}

// DeviceNode is a device node edit.
type DeviceNode struct {
	Path        string       `json:"path"`
	Type        string       `json:"type,omitempty"`
	Major       int64        `json:"major,omitempty"`
	Minor       int64        `json:"minor,omitempty"`
	FileMode    *fs.FileMode `json:"fileMode,omitempty"`
	Permissions string       `json:"permissions,omitempty"`
}

// Name is the CDI device name of port port of HCA hca, which has ports
// ports: the HCA's name when it has one port (every mlx5 function, rxe),
// else the name with "-p<port>" (mlx4_0-p2). It depends only on the HCA,
// so the same port gets the same name whatever networks exist.
func Name(hca string, port, ports int) string {
	if ports <= 1 {
		return hca
	}
	return hca + "-p" + strconv.Itoa(port)
}

// NameOnHost is the CDI device name of an HCA port on the host sys reads
// (see Name): it counts the HCA's ports in sysfs.
func NameOnHost(sys *rdma.Sysfs, hca string, port int) (string, error) {
	ports, err := sys.Ports(hca)
	if err != nil {
		return "", err
	}
	return Name(hca, port, len(ports)), nil
}

// Qualified is the fully qualified CDI name of a device, as given to
// docker run --device: "rdma-macvlan/hca=<name>", name from Name.
func Qualified(name string) string { return Kind + "=" + name }

// Unqualified is the device name in a fully qualified CDI name of this
// plugin's kind ("" for any other).
func Unqualified(qualified string) string {
	name, ok := strings.CutPrefix(qualified, Kind+"=")
	if !ok {
		return ""
	}
	return name
}

// SpecPath is where WriteSpec puts the spec of the device name.
func SpecPath(dir, name string) string {
	return filepath.Join(dir, cdiFilePrefix+name+".json")
}

// SpecNames lists the device names that have a spec written by
// WriteSpec in dir, sorted.
func SpecNames(dir string) ([]string, error) {
	paths, err := filepath.Glob(SpecPath(dir, "*"))
	if err != nil {
		return nil, fmt.Errorf("list CDI specs in %s: %w", dir, err)
	}
	names := make([]string, 0, len(paths))
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), cdiFilePrefix), ".json")
		if checkCDIName(name) == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// MaxSpecBytes bounds the spec files ReadSpec reads. A spec this
// plugin writes holds one device, its few device nodes and its environment:
// about 1 KiB.
const MaxSpecBytes = 64 << 10

// ReadSpec reads the spec of the device name in dir; ok is false when
// there is none. The CDI directory is shared with other CDI producers, so
// the file is read only if it is a regular file of at most MaxSpecBytes,
// not through a symbolic link and without blocking (see safefile.Read);
// anything else at the spec's path, and a spec of another kind, is an
// error wrapping ErrForeignSpec.
func ReadSpec(dir, name string) (spec Spec, ok bool, err error) {
	if err := checkCDIName(name); err != nil {
		return Spec{}, false, err
	}
	path := SpecPath(dir, name)
	data, err := safefile.Read(path, MaxSpecBytes)
	var bad *safefile.Error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Spec{}, false, nil
	case errors.As(err, &bad) && bad.TooLarge:
		return Spec{}, true, fmt.Errorf("CDI spec file %v, %w", bad, ErrForeignSpec)
	case errors.As(err, &bad):
		return Spec{}, true, fmt.Errorf("CDI spec file %v, %w (rdma-macvlan writes only regular files there)", bad, ErrForeignSpec)
	case err != nil:
		return Spec{}, false, fmt.Errorf("read CDI spec %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return Spec{}, true, fmt.Errorf("CDI spec %s is not a CDI spec (%v): %w", path, err, ErrForeignSpec)
	}
	if spec.Kind != Kind {
		return Spec{}, true, fmt.Errorf("CDI spec %s is of kind %q, not %q: %w", path, spec.Kind, Kind, ErrForeignSpec)
	}
	return spec, true, nil
}

// ErrForeignSpec marks a spec file with this plugin's file name that
// the plugin cannot read as one of its own.
var ErrForeignSpec = errors.New("not a spec this plugin wrote")

// Owner is the mark of the instance that wrote the spec ("" for specs of
// versions before the mark).
func (s Spec) Owner() string { return s.Annotations[OwnerAnnotation] }

// Environment a device sets: RDMA_MACVLAN_DEVICE_<key>=<hca>:<port> and,
// when the netdev is known, RDMA_MACVLAN_NETDEV_<key>=<netdev>, key from
// EnvKey of the device's name.
//
// Every name is the device's own. The CDI library replaces a variable that
// is already set, and the engine applies CDI edits after docker run -e and
// the image's ENV: a variable two devices set names only the last one's
// port, and one the user set is overwritten. So a device sets no variable
// another device or the user would set (no NCCL_IB_HCA, no
// UCX_NET_DEVICES): those name every rail of a container and its own GID,
// which no single device knows; rdma-exec (docker rdma run) sets them. For
// the same reason the traffic class and service level a device carries are
// under its own names, never NCCL_IB_TC or UCX_IB_TRAFFIC_CLASS.
const (
	EnvDevicePrefix       = "RDMA_MACVLAN_DEVICE_"
	EnvNetdevPrefix       = "RDMA_MACVLAN_NETDEV_"
	EnvTrafficClassPrefix = "RDMA_MACVLAN_TRAFFIC_CLASS_"
	EnvServiceLevelPrefix = "RDMA_MACVLAN_SERVICE_LEVEL_"
)

// EnvKey is the part of a device's variable names that names the device:
// its name with every character other than an ASCII letter, digit or _
// written as _ (mlx4_0-p2 -> mlx4_0_p2), so that the names are shell
// variable names.
func EnvKey(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// PortsInEnv returns the HCA ports the devices' variables in env name
// ("mlx5_0:1"), in the order of env.
func PortsInEnv(env []string) []string {
	var out []string
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok && strings.HasPrefix(k, EnvDevicePrefix) && v != "" {
			out = append(out, v)
		}
	}
	return out
}

// NewSpec builds the spec of one HCA port: its device nodes, readable and
// writable, and its own variables (see EnvDevicePrefix).
func NewSpec(d Device) (Spec, error) {
	if err := checkCDIName(d.HCA); err != nil {
		return Spec{}, err
	}
	if d.Name == "" {
		d.Name = d.HCA
	}
	if err := checkCDIName(d.Name); err != nil {
		return Spec{}, err
	}
	if d.Port < 1 {
		return Spec{}, fmt.Errorf("CDI spec for RDMA device %s: port %d is not a port number", d.HCA, d.Port)
	}
	if len(d.Nodes) == 0 {
		return Spec{}, fmt.Errorf("CDI spec for RDMA device %s: %w", d.HCA, rdma.ErrNoUverbs)
	}
	key := EnvKey(d.Name)
	env := []string{EnvDevicePrefix + key + "=" + d.HCA + ":" + strconv.Itoa(d.Port)}
	if d.Netdev != "" {
		env = append(env, EnvNetdevPrefix+key+"="+d.Netdev)
	}
	if d.TrafficClass != nil {
		env = append(env, EnvTrafficClassPrefix+key+"="+strconv.Itoa(*d.TrafficClass))
	}
	if d.ServiceLevel != nil {
		env = append(env, EnvServiceLevelPrefix+key+"="+strconv.Itoa(*d.ServiceLevel))
	}
	mode := cdiFileMode
	nodes := make([]DeviceNode, 0, len(d.Nodes))
	for _, n := range d.Nodes {
		typ := n.Type
		if typ == "" {
			typ = "c"
		}
		nodes = append(nodes, DeviceNode{
			Path:        n.Path,
			Type:        typ,
			Major:       int64(n.Major),
			Minor:       int64(n.Minor),
			FileMode:    &mode,
			Permissions: "rw",
		})
	}
	var ann map[string]string
	if d.Owner != "" {
		ann = map[string]string{OwnerAnnotation: d.Owner}
	}
	return Spec{
		Version:     Version,
		Kind:        Kind,
		Annotations: ann,
		Devices: []SpecDevice{{
			Name:           d.Name,
			ContainerEdits: ContainerEdits{Env: env, DeviceNodes: nodes},
		}},
	}, nil
}

// WriteSpec writes the CDI spec of one HCA port to dir/rdma-macvlan-<name>.json
// (mode 0644), atomically: a reader (dockerd watches the directory) sees
// the old file or the new one, never a part. The temporary file's name does
// not end in .json, so CDI caches ignore it.
func WriteSpec(dir string, d Device) (path string, err error) {
	spec, err := NewSpec(d)
	if err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode CDI spec for RDMA device %s: %w", d.HCA, err)
	}
	data = append(data, '\n')
	path = SpecPath(dir, spec.Devices[0].Name)
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

// RemoveSpec removes the spec of the device name and any temporary file
// a crash left behind. Removing a spec that does not exist succeeds.
func RemoveSpec(dir, name string) error {
	if err := checkCDIName(name); err != nil {
		return err
	}
	path := SpecPath(dir, name)
	// Not durable is done too: specs no network uses are removed at start.
	if err := atomicfile.Remove(path); err != nil && !notDurable(err) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}

func checkCDIName(hca string) error {
	if hca == "" || hca == "." || hca == ".." || strings.ContainsAny(hca, "/\x00") {
		return fmt.Errorf("RDMA device name %q: %w", hca, rdma.ErrInvalidName)
	}
	last := len(hca) - 1
	for i, r := range hca {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if alnum || i > 0 && i < last && (r == '_' || r == '-' || r == '.' || r == ':') {
			continue
		}
		return fmt.Errorf("RDMA device name %q cannot be a CDI device name (letters, digits, _ - . :): %w", hca, rdma.ErrInvalidName)
	}
	return nil
}
