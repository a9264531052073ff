package compose

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaexec"
)

// fakeResolver answers from tables: rails by network key, rails by
// container, images by name (a missing one is an error).
type fakeResolver struct {
	rails      map[string]*Rail
	containers map[string][]*Rail
	images     map[string][2][]string
	asked      []string
}

func (f *fakeResolver) Network(key string, def ProjectNetwork) (*Rail, error) {
	return f.rails[key], nil
}

func (f *fakeResolver) Container(name string) ([]*Rail, error) {
	r, ok := f.containers[name]
	if !ok {
		return nil, errors.New("no such container")
	}
	return r, nil
}

func (f *fakeResolver) Image(service string, svc Service) ([]string, []string, error) {
	f.asked = append(f.asked, svc.Image)
	ic, ok := f.images[svc.Image]
	if !ok {
		return nil, nil, errors.New("no such image " + svc.Image)
	}
	return ic[0], ic[1], nil
}

var (
	roce  = &Rail{Name: "p_roce", HCA: "mlx5_0", Port: 1, Subnets: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}, CDI: []string{"rdma-macvlan/hca=mlx5_0"}}
	roce2 = &Rail{Name: "p_roce2", HCA: "mlx5_1", Port: 1, Nodes: []string{"/dev/infiniband/uverbs1", "/dev/infiniband/rdma_cm"}}
	roce3 = &Rail{Name: "p_roce3", HCA: "mlx5_2", Port: 1, Nodes: []string{"/dev/infiniband/uverbs2", "/dev/infiniband/rdma_cm"}}
)

const (
	exec     = "/.rdma-macvlan/rdma-exec"
	netRoce  = "name=p_roce,hca=mlx5_0,port=1,subnet=10.9.0.0/24"
	netRoce2 = "name=p_roce2,hca=mlx5_1,port=1"
)

func resolver() *fakeResolver {
	return &fakeResolver{
		rails:      map[string]*Rail{"roce": roce, "roce2": roce2, "roce3": roce3},
		containers: map[string][]*Rail{"launcher": {roce2}},
		images: map[string][2][]string{
			"worker":  {{"/entry.sh", "-x"}, {"serve", "$HOME"}},
			"cmdonly": {nil, {"sleep", "9"}},
			"empty":   {nil, nil},
		},
	}
}

var opts = Options{Memlock: "-1:-1", Helper: "/usr/local/lib/rdma-macvlan/rdma-exec", HelperArgs: []string{"--timeout", "10s"}}

// model builds a model from compose config's JSON.
func model(t *testing.T, js string) *Model {
	t.Helper()
	m, err := Decode([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const nets = `"networks": {"roce": {"name": "p_roce", "driver": "rdma-macvlan:latest"}, "roce2": {"name": "p_roce2", "driver": "rdma-macvlan:latest"},
	"roce3": {"name": "p_roce3", "driver": "rdma-macvlan:latest"}, "default": {"name": "p_default"}}`

func TestGenerate(t *testing.T) {
	full := func(rails []string, devs []string, entry ...string) *ServiceOverride {
		return &ServiceOverride{Rails: rails, Devices: devs, CapAdd: []string{"IPC_LOCK"}, Memlock: "-1:-1", Helper: opts.Helper, Entrypoint: entry}
	}
	cdi0 := []string{"rdma-macvlan/hca=mlx5_0"}
	tests := []struct {
		name  string
		model string
		opts  *Options
		want  map[string]*ServiceOverride
		notes []string
		err   string
		asked []string // images the resolver was asked about
	}{{
		name: "services on an rdma-macvlan network get everything, the others nothing",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "worker", "entrypoint": null, "command": null, "networks": {"roce": null}},
			"b": {"image": "worker", "entrypoint": null, "command": null, "networks": {"roce": null, "default": null}, "deploy": {"replicas": 3}},
			"web": {"image": "nginx", "entrypoint": null, "command": null, "networks": {"default": null}}}}`,
		want: map[string]*ServiceOverride{
			"a": withCmd(full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--", "/entry.sh", "-x"), "serve", "$HOME"),
			"b": withCmd(full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--", "/entry.sh", "-x"), "serve", "$HOME"),
		},
		asked: []string{"worker", "worker"},
	}, {
		name: "the service's entrypoint replaces the image's, whose CMD is dropped; the image is not read",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "worker", "entrypoint": ["/bin/run", "$$X"], "command": null, "networks": {"roce": null}}}}`,
		want: map[string]*ServiceOverride{"a": full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--", "/bin/run", "$X")},
	}, {
		name: "an empty entrypoint clears the image's; the service's command runs",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "worker", "entrypoint": [], "command": ["sh", "-c", "echo $$HOME"], "networks": {"roce": null}}}}`,
		want: map[string]*ServiceOverride{"a": full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--")},
	}, {
		name: "the service's command is kept; the image's entrypoint goes after rdma-exec",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "worker", "entrypoint": null, "command": ["bench"], "networks": {"roce": null}}}}`,
		want:  map[string]*ServiceOverride{"a": full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--", "/entry.sh", "-x")},
		asked: []string{"worker"},
	}, {
		name: "an image with CMD only",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "cmdonly", "entrypoint": null, "command": null, "user": "65534", "networks": {"roce": null}}}}`,
		want:  map[string]*ServiceOverride{"a": withCmd(full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--"), "sleep", "9")},
		asked: []string{"cmdonly"},
	}, {
		name: "the user's own device, IPC_LOCK and memlock are kept and not repeated",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "entrypoint": ["w"], "command": null, "networks": {"roce2": null},
				"devices": [{"source": "/dev/infiniband/uverbs1", "target": "/dev/infiniband/uverbs1"}], "cap_add": ["cap_ipc_lock"],
				"ulimits": {"memlock": {"soft": 1024, "hard": 2048}}}}}`,
		want: map[string]*ServiceOverride{"a": {Rails: []string{"p_roce2"}, Devices: []string{"/dev/infiniband/rdma_cm"}, Helper: opts.Helper,
			Entrypoint: []string{exec, "--net", netRoce2, "--timeout", "10s", "--", "w"}}},
		notes: []string{"service a: device /dev/infiniband/uverbs1 given already", "service a: its own ulimits memlock is kept"},
	}, {
		name: "cap_drop IPC_LOCK is respected and said",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "entrypoint": ["w"], "command": null, "networks": {"roce2": null}, "cap_drop": ["ALL"]}}}`,
		want: map[string]*ServiceOverride{"a": {Rails: []string{"p_roce2"}, Devices: roce2.Nodes, Memlock: "-1:-1", Helper: opts.Helper,
			Entrypoint: []string{exec, "--net", netRoce2, "--timeout", "10s", "--", "w"}}},
		notes: []string{"service a: cap_drop IPC_LOCK: not adding it (pinned memory then counts against the memlock limit)"},
	}, {
		name: "several rdma-macvlan networks: every rail, by priority then name, every HCA's devices once",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "entrypoint": ["w"], "command": null, "networks": {"roce3": null, "roce": null, "roce2": {"priority": 5}}}}}`,
		want: map[string]*ServiceOverride{"a": full([]string{"p_roce2", "p_roce", "p_roce3"},
			[]string{"/dev/infiniband/uverbs1", "/dev/infiniband/rdma_cm", "rdma-macvlan/hca=mlx5_0", "/dev/infiniband/uverbs2"},
			exec, "--net", netRoce2, "--net", netRoce, "--net", "name=p_roce3,hca=mlx5_2,port=1", "--timeout", "10s", "--", "w")},
	}, {
		name: "network_mode: service:X shares X's rails, container:Y the container's; host gets nothing",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "entrypoint": ["w"], "command": null, "networks": {"roce": null}},
			"side": {"image": "x", "entrypoint": ["s"], "command": null, "network_mode": "service:a"},
			"side2": {"image": "x", "entrypoint": ["s2"], "command": null, "network_mode": "service:side"},
			"attached": {"image": "x", "entrypoint": ["c"], "command": null, "network_mode": "container:launcher"},
			"h": {"image": "x", "entrypoint": null, "command": null, "network_mode": "host"}}}`,
		want: map[string]*ServiceOverride{
			"a":        full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--", "w"),
			"side":     full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--", "s"),
			"side2":    full([]string{"p_roce"}, cdi0, exec, "--net", netRoce, "--timeout", "10s", "--", "s2"),
			"attached": full([]string{"p_roce2"}, roce2.Nodes, exec, "--net", netRoce2, "--timeout", "10s", "--", "c"),
		},
	}, {
		name: "--no-wait: devices, IPC_LOCK and memlock only",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "empty", "entrypoint": null, "command": null, "networks": {"roce": null}}}}`,
		opts: &Options{Memlock: "8388608:8388608", NoWait: true},
		want: map[string]*ServiceOverride{"a": {Rails: []string{"p_roce"}, Devices: cdi0, CapAdd: []string{"IPC_LOCK"}, Memlock: "8388608:8388608"}},
	}, {
		name: "no entrypoint and no command anywhere",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "empty", "entrypoint": null, "command": null, "networks": {"roce": null}}}}`,
		err: "service a: neither the service nor image empty has an entrypoint or a command: give the service a command",
	}, {
		name: "a network_mode loop",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "network_mode": "service:b", "entrypoint": null, "command": null},
			"b": {"image": "x", "network_mode": "service:a", "entrypoint": null, "command": null}}}`,
		err: "service a: network_mode loops through services a -> b -> a",
	}, {
		name: "a volume where rdma-exec goes",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "entrypoint": ["w"], "command": null, "networks": {"roce": null}, "volumes": [{"type": "bind", "source": "/x", "target": "/.rdma-macvlan/rdma-exec"}]}}}`,
		err: "service a mounts something at /.rdma-macvlan/rdma-exec, where rdma-exec goes: remove that volume, or use docker rdma compose --no-wait",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := resolver()
			o := opts
			if tc.opts != nil {
				o = *tc.opts
			}
			ov, err := Generate(model(t, tc.model), r, o)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ov.Services, tc.want) {
				got, _ := json.MarshalIndent(ov.Services, "", " ")
				want, _ := json.MarshalIndent(tc.want, "", " ")
				t.Errorf("override\n%s\nwant\n%s", got, want)
			}
			if !reflect.DeepEqual(ov.Notes, tc.notes) {
				t.Errorf("notes %q, want %q", ov.Notes, tc.notes)
			}
			if !reflect.DeepEqual(r.asked, tc.asked) {
				t.Errorf("images asked %q, want %q", r.asked, tc.asked)
			}
		})
	}
}

func withCmd(so *ServiceOverride, cmd ...string) *ServiceOverride {
	so.Command = cmd
	return so
}

// TestWrite checks the file compose reads: quoted strings, $ doubled, the
// memlock limit as numbers, rdma-exec bound read-only.
func TestWrite(t *testing.T) {
	ov := &Override{Services: map[string]*ServiceOverride{
		"b": {Rails: []string{"p_roce"}, Devices: []string{"rdma-macvlan/hca=mlx5_0"}, CapAdd: []string{"IPC_LOCK"}, Memlock: "-1:-1",
			Helper: "/opt/rdma exec", Entrypoint: []string{exec, "--", "sh"}, Command: []string{"-c", `echo "$HOME"`}},
		"a": {Rails: []string{"p_roce"}, Memlock: "1024:2048"},
	}}
	var b bytes.Buffer
	if err := ov.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := Header + `services:
  "a":
    # on p_roce
    ulimits:
      memlock:
        soft: 1024
        hard: 2048
  "b":
    # on p_roce
    devices:
      - "rdma-macvlan/hca=mlx5_0"
    cap_add:
      - "IPC_LOCK"
    ulimits:
      memlock:
        soft: -1
        hard: -1
    volumes:
      - type: bind
        source: "/opt/rdma exec"
        target: "/.rdma-macvlan/rdma-exec"
        read_only: true
    entrypoint:
      - "/.rdma-macvlan/rdma-exec"
      - "--"
      - "sh"
    command:
      - "-c"
      - "echo \"$$HOME\""
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := (&Override{}).Write(&b); err != nil || !strings.Contains(b.String(), "services: {}\n") {
		t.Errorf("an empty override: %q, %v", b.String(), err)
	}
}

// A network's traffic class and service level reach rdma-exec's --net, so a
// service on a lossless network exports NCCL_IB_TC and the rest as docker
// rdma run's container does; a network without them passes none.
func TestGenerateCarriesQoS(t *testing.T) {
	tc, sl := 106, 3
	r := resolver()
	qos := *roce
	qos.TrafficClass, qos.ServiceLevel = &tc, &sl
	r.rails["roce"] = &qos
	ov, err := Generate(model(t, `{"name": "p", `+nets+`, "services": {
		"a": {"image": "worker", "entrypoint": ["/bin/run"], "command": null, "networks": {"roce": null, "roce2": null}}}}`), r, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := ov.Services["a"].Entrypoint
	want := []string{exec, "--net", netRoce + ",traffic_class=106,service_level=3", "--net", netRoce2, "--timeout", "10s", "--", "/bin/run"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entrypoint %q, want %q", got, want)
	}
}

// overrideLine is every shape of line Write writes: a value can only be
// one of the quoted strings (the groups), or a memlock number.
var overrideLine = regexp.MustCompile(`^(?:` +
	`#[^\n]*|services:(?: \{\})?|` +
	`  ("(?:[^"\\]|\\.)*"):|` +
	`    # on [^\n]*|` +
	`    (?:devices|cap_add|ulimits|volumes|entrypoint|command):|` +
	`      - ("(?:[^"\\]|\\.)*")|` +
	`      memlock:|        (?:soft|hard): -?[0-9]+|` +
	`      - type: bind|        (?:source|target): ("(?:[^"\\]|\\.)*")|        read_only: true` +
	`)$`)

// TestWriteKeepsValuesInTheirPlace: names and commands with line breaks
// (YAML's: LF, CR, NEL, LS, PS), quotes, control characters or bytes that
// are not UTF-8 stay values where the override puts them: no line other
// than the override's own, every quoted string read back is the string
// given ($ doubled), and a comment stays one line.
func TestWriteKeepsValuesInTheirPlace(t *testing.T) {
	const inject = "x\n    privileged: true\n    pid: host"
	hostile := []string{inject, "a\rb", "a\u0085b", "a\u2028b\u2029", "q\"uote\\", "esc\x1b[31m\x07\x7f", "bad\xffutf8", "$HOME"}
	so := &ServiceOverride{Rails: []string{"roce", inject, "c1\u009b31m"}, Devices: hostile, CapAdd: []string{IPCLock}, Memlock: "-1:-1",
		Helper: "/opt/x\n    privileged: true", Entrypoint: hostile, Command: hostile}
	ov := &Override{Services: map[string]*ServiceOverride{"svc\n  evil:\n    privileged: true": so}}
	var b bytes.Buffer
	if err := ov.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, s := range append(append([]string{"svc\n  evil:\n    privileged: true", so.Helper, rdmaexec.ContainerPath, IPCLock}, hostile...), "bad\uFFFDutf8") {
		want[strings.ReplaceAll(s, "$", "$$")] = true
	}
	comments := 0
	for i, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		m := overrideLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("line %d is none of the override's own: %q\n%s", i+1, line, b.String())
			continue
		}
		if strings.HasPrefix(line, "    # on ") {
			comments++
			if want := "    # on roce, x\\n    privileged: true\\n    pid: host, c1\\u009b31m"; line != want {
				t.Errorf("comment %q, want %q", line, want)
			}
		}
		for _, q := range m[1:] {
			if q == "" {
				continue
			}
			s, err := strconv.Unquote(q)
			if err != nil || !want[s] {
				t.Errorf("line %d: %s reads back as %q (%v), not one of the strings given", i+1, q, s, err)
			}
		}
		for _, r := range line {
			if r < 0x20 || r >= 0x7f && r < 0xa0 || r == '\u2028' || r == '\u2029' || r == '\uFEFF' {
				t.Errorf("line %d holds %U, which YAML refuses or reads as a line break: %q", i+1, r, line)
			}
		}
	}
	if comments != 1 {
		t.Errorf("%d comment lines on the service's networks, want 1", comments)
	}
	bad := &Override{Services: map[string]*ServiceOverride{"s": {Memlock: "1\n    privileged: true\n    x: 2"}}}
	if err := bad.Write(&b); err == nil || !strings.Contains(err.Error(), "is not SOFT:HARD in bytes") {
		t.Errorf("a memlock that is not numbers: %v", err)
	}
}
