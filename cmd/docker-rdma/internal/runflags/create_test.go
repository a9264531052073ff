package runflags

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A run on two or more networks for an engine that creates on one: the
// first network stays in docker create, the others become docker network
// connect (advanced fields as its flags), -d and --detach-keys move to
// docker start, and everything else, the command included, is kept.
func TestSplitCreate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		create   []string
		connects [][]string
		detach   bool
		start    []string
	}{
		{"two networks, attached, -it",
			[]string{"--rm", "-it", "--net", "a", "--network=b", "--ip", "10.0.0.2", "img", "sh", "-c", "--net x"},
			[]string{"--rm", "-it", "--network", "a", "--ip", "10.0.0.2", "img", "sh", "-c", "--net x"},
			[][]string{{"b"}}, false, []string{"--attach", "--interactive"}},
		{"-d in a group, advanced syntax, detach keys",
			[]string{"-dte", "X=1", "--detach-keys", "ctrl-x", "--network", "name=a,ip=10.0.1.5", "--network", "name=b,ip=10.0.2.5,alias=w", "--network", "c", "--", "img"},
			[]string{"-te", "X=1", "--network", "name=a,ip=10.0.1.5", "--", "img"},
			[][]string{{"--ip", "10.0.2.5", "--alias", "w", "b"}, {"c"}}, true, nil},
		{"-d=false and --detach=false attach; --sig-proxy dropped",
			[]string{"-d=false", "--detach=false", "--sig-proxy=false", "--net", "a", "--net", "b", "-i", "img"},
			[]string{"--network", "a", "-i", "img"},
			[][]string{{"b"}}, false, []string{"--attach", "--interactive"}},
	} {
		p, err := Parse(tc.args)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r, err := p.SplitCreate()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(r.Create, tc.create) || !reflect.DeepEqual(r.Connects, tc.connects) || r.Detach != tc.detach || !reflect.DeepEqual(r.Start, tc.start) {
			t.Errorf("%s:\n create %q\n connects %q\n detach %v start %q\nwant\n create %q\n connects %q\n detach %v start %q",
				tc.name, r.Create, r.Connects, r.Detach, r.Start, tc.create, tc.connects, tc.detach, tc.start)
		}
	}
}

func TestSplitCreateRefusesWhatConnectCannotTake(t *testing.T) {
	p, err := Parse([]string{"--net", "a", "--network", "name=b,mac-address=02:00:00:00:00:01", "img"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.SplitCreate()
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), `field "mac-address" cannot be given to docker network connect`) {
		t.Errorf("error %v", err)
	}
}
