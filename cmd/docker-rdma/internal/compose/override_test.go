package compose

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fakeResolver answers from tables: the rdma-macvlan networks by key, the
// rdma-macvlan networks of each container.
type fakeResolver struct {
	rdma       map[string]bool
	containers map[string][]string
	asked      []string
}

func (f *fakeResolver) Network(key string, def ProjectNetwork) (bool, error) {
	f.asked = append(f.asked, key)
	return f.rdma[key], nil
}

func (f *fakeResolver) Container(name string) ([]string, error) {
	r, ok := f.containers[name]
	if !ok {
		return nil, errors.New("no such container")
	}
	return r, nil
}

func resolver() *fakeResolver {
	return &fakeResolver{
		rdma:       map[string]bool{"roce": true, "roce2": true, "roce3": true},
		containers: map[string][]string{"launcher": {"p_roce2"}, "plain": nil},
	}
}

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
	tests := []struct {
		name  string
		model string
		want  map[string][]string
		err   string
	}{{
		name: "services on an rdma-macvlan network, the others not",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "worker", "networks": {"roce": null}},
			"b": {"image": "worker", "networks": {"roce": null, "default": null}, "deploy": {"replicas": 3}},
			"web": {"image": "nginx", "networks": {"default": null}}}}`,
		want: map[string][]string{"a": {"p_roce"}, "b": {"p_roce"}},
	}, {
		name: "several rdma-macvlan networks: every rail, by priority then name",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "networks": {"roce3": null, "roce": null, "roce2": {"priority": 5}}}}}`,
		want: map[string][]string{"a": {"p_roce2", "p_roce", "p_roce3"}},
	}, {
		name: "a network without a name of its own is named by its key",
		model: `{"name": "p", "networks": {"roce": {"driver": "rdma-macvlan:latest"}}, "services": {
			"a": {"image": "x", "networks": {"roce": null}}}}`,
		want: map[string][]string{"a": {"roce"}},
	}, {
		name: "network_mode: service:X shares X's rails, container:Y the container's; host and a plain container get nothing",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "networks": {"roce": null}},
			"side": {"image": "x", "network_mode": "service:a"},
			"side2": {"image": "x", "network_mode": "service:side"},
			"attached": {"image": "x", "network_mode": "container:launcher"},
			"beside": {"image": "x", "network_mode": "container:plain"},
			"h": {"image": "x", "network_mode": "host"}}}`,
		want: map[string][]string{"a": {"p_roce"}, "side": {"p_roce"}, "side2": {"p_roce"}, "attached": {"p_roce2"}},
	}, {
		name: "a network_mode loop",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "network_mode": "service:b"},
			"b": {"image": "x", "network_mode": "service:a"}}}`,
		err: "service a: network_mode loops through services a -> b -> a",
	}, {
		name: "a container that does not exist",
		model: `{"name": "p", ` + nets + `, "services": {
			"a": {"image": "x", "network_mode": "container:gone"}}}`,
		err: "service a (network_mode container:gone): no such container",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := resolver()
			ov, err := Generate(model(t, tc.model), r)
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
				t.Errorf("services %q, want %q", ov.Services, tc.want)
			}
			seen := map[string]bool{}
			for _, k := range r.asked {
				if seen[k] {
					t.Errorf("network %s asked twice: %q", k, r.asked)
				}
				seen[k] = true
			}
		})
	}
}

// TestWrite checks the file compose reads: runtime: rdma-macvlan on each
// service, the runtime's variables and memlock only when asked, quoted
// strings, $ doubled, the memlock limit as numbers.
func TestWrite(t *testing.T) {
	ov := &Override{Services: map[string][]string{"b": {"p_roce", "p_roce2"}, "a": {"p_roce"}}}
	var b bytes.Buffer
	if err := ov.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := Header + `services:
  "a":
    # on p_roce
    runtime: "rdma-macvlan"
  "b":
    # on p_roce, p_roce2
    runtime: "rdma-macvlan"
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	ov.Env, ov.Memlock = []string{"RDMA_MACVLAN_NO_WAIT=1", "RDMA_MACVLAN_GID_TIMEOUT=$3s"}, "8388608:-1"
	b.Reset()
	if err := ov.Write(&b); err != nil {
		t.Fatal(err)
	}
	want = Header + `services:
  "a":
    # on p_roce
    runtime: "rdma-macvlan"
    environment:
      "RDMA_MACVLAN_NO_WAIT": "1"
      "RDMA_MACVLAN_GID_TIMEOUT": "$$3s"
    ulimits:
      memlock:
        soft: 8388608
        hard: -1
  "b":
    # on p_roce, p_roce2
    runtime: "rdma-macvlan"
    environment:
      "RDMA_MACVLAN_NO_WAIT": "1"
      "RDMA_MACVLAN_GID_TIMEOUT": "$$3s"
    ulimits:
      memlock:
        soft: 8388608
        hard: -1
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := (&Override{}).Write(&b); err != nil || !strings.Contains(b.String(), "services: {}\n") {
		t.Errorf("an empty override: %q, %v", b.String(), err)
	}
}

// overrideLine is every shape of line Write writes: a value can only be
// one of the quoted strings (the groups), or a memlock number.
var overrideLine = regexp.MustCompile(`^(?:` +
	`#[^\n]*|services:(?: \{\})?|` +
	`  ("(?:[^"\\]|\\.)*"):|` +
	`    # on [^\n]*|` +
	`    runtime: ("(?:[^"\\]|\\.)*")|` +
	`    (?:environment|ulimits):|` +
	`      ("(?:[^"\\]|\\.)*"): ("(?:[^"\\]|\\.)*")|` +
	`      memlock:|        (?:soft|hard): -?[0-9]+` +
	`)$`)

// TestWriteKeepsValuesInTheirPlace: names and values with line breaks
// (YAML's: LF, CR, NEL, LS, PS), quotes, control characters or bytes that
// are not UTF-8 stay values where the override puts them: no line other
// than the override's own, every quoted string read back is the string
// given ($ doubled), and a comment stays one line.
func TestWriteKeepsValuesInTheirPlace(t *testing.T) {
	const inject = "x\n    privileged: true\n    pid: host"
	hostile := []string{inject, "a\rb", "a\u0085b", "a\u2028b\u2029", "q\"uote\\", "esc\x1b[31m\x07\x7f", "bad\xffutf8", "$HOME"}
	var env []string
	for _, h := range hostile {
		env = append(env, "K"+h+"="+h)
	}
	name := "svc\n  evil:\n    privileged: true"
	ov := &Override{Services: map[string][]string{name: {"roce", inject, "c1\u009b31m"}}, Env: env, Memlock: "-1:-1"}
	var b bytes.Buffer
	if err := ov.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"rdma-macvlan": true}
	for _, s := range append([]string{name, "bad\uFFFDutf8"}, hostile...) {
		want[strings.ReplaceAll(s, "$", "$$")] = true
		want["K"+strings.ReplaceAll(s, "$", "$$")] = true
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
	bad := &Override{Services: map[string][]string{"s": {"roce"}}, Memlock: "1\n    privileged: true\n    x: 2"}
	if err := bad.Write(&b); err == nil || !strings.Contains(err.Error(), "is not SOFT:HARD in bytes") {
		t.Errorf("a memlock that is not numbers: %v", err)
	}
}
