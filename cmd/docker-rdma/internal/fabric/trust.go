package fabric

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/internal/sysattr"
)

// driverMLX5 is the kernel driver of ConnectX netdevs (mlx5_core.sf for
// a sub-function's).
const driverMLX5 = "mlx5_core"

// roceDSCP is the DSCP the trust fix maps when no traffic class is given,
// and the one doctor's example traffic class prefers: the one most RoCE
// fabrics carry lossless traffic with (traffic class 104, or 106 with
// ECT(0) in the ECN bits).
const roceDSCP = 26

// ectZero is ECT(0) in the ECN bits, the lower two of the traffic class.
const ectZero = 0b10

// readNetdevDriver names the kernel driver of netdev's device under the
// sysfs root: mlx5_core for a ConnectX port; "" for a virtual netdev
// (a bond, a veth), which has no device.
// Equivalent to: readlink /sys/class/net/NETDEV/device/driver
func readNetdevDriver(root, netdev string) string {
	target, err := os.Readlink(filepath.Join(root, "sys/class/net", netdev, "device", "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// readQoSTrust reads the trust state MLNX_OFED's mlx5 driver shows in
// sys/class/net/NETDEV/qos/trust ("pcp" or "dscp", after a label in some
// versions); "" where the file is missing or says neither (the upstream
// kernel has no such file).
// Equivalent to: cat /sys/class/net/NETDEV/qos/trust
func readQoSTrust(root, netdev string) string {
	v, err := sysattr.Read(filepath.Join(root, "sys/class/net", netdev, "qos", "trust"), nil)
	if err != nil {
		return ""
	}
	f := strings.Fields(strings.ToLower(v))
	if len(f) == 0 {
		return ""
	}
	switch last := f[len(f)-1]; last {
	case "pcp", "dscp":
		return last
	}
	return ""
}

// mlx5 reports whether the DCB netdev is a ConnectX port.
func (r *Report) mlx5() bool {
	return strings.HasPrefix(r.Driver, driverMLX5)
}

// trustDSCPFix is the command that makes the DCB netdev trust DSCP, with
// DSCP code sent on a priority with PFC. mlx5 has no dcbnl_setapptrust
// (dcb apptrust set answers "operation not supported" on ConnectX): its
// first DSCP entry in the APP table turns it to DSCP trust, and removing
// the last turns it back to PCP, so on mlx5 the fix adds that entry.
func (r *Report) trustDSCPFix(code int) string {
	if !r.mlx5() {
		return "dcb apptrust set dev " + r.DCBNetdev + " order dscp pcp"
	}
	prio := "PRIO"
	if r.DCB != nil && r.DCB.PFC != nil {
		if on := r.DCB.PFC.EnabledPriorities(); len(on) > 0 {
			prio = fmt.Sprint(on[0])
		}
	}
	return fmt.Sprintf("dcb app add dev %s dscp-prio %d:%s (ConnectX has no dcb apptrust: its first DSCP entry in the APP table turns it to DSCP trust), or with MLNX_OFED: mlnx_qos -i %s --trust dscp",
		r.DCBNetdev, code, prio, r.DCBNetdev)
}
