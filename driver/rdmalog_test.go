package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// The rdma package logs to the driver's logger: New gives it Config.Log.
func TestRDMALogsToTheDriversLogger(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	d, err := New(Config{StateDir: t.TempDir(), Links: drivertest.NewLinks("p0"), Log: log,
		Sysfs: rdma.NewSysfs(hosts(t, "p0")), CDIDir: t.TempDir(),
		NetnsMode: func() (string, error) { return "", errors.New("no RDMA netlink here") }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.DebugLevel && strings.Contains(e.Message, "mode shared read from sysfs: netlink failed: no RDMA netlink here") {
			return
		}
	}
	t.Fatalf("the driver's logger did not get rdma's line on the netns mode read from sysfs; it got %d lines", len(hook.AllEntries()))
}
