#!/usr/bin/env bash
# Mutation check: breaks, one at a time, rules the tests are meant to guard,
# and fails unless some test catches each break.
#
#   scripts/mutate.sh             every mutant
#   scripts/mutate.sh NAME...     only these
#   scripts/mutate.sh --list      names, declarations and the tests each one runs
#   scripts/mutate.sh --check     only that every mutant applies (seconds; make lint)
#
# Each mutant replaces a short piece of code in one declaration of a
# package (tools/mutant): the code is found by its Go tokens, so gofmt,
# re-wrapping, comments and moving the declaration to another file of its
# package leave the mutant as it is. It is applied to a temporary copy of
# the tree (the files git knows of, as they are in the working tree: the
# working tree itself is never written), the packages named with it are
# tested there (without the race detector, for speed), and the tests that
# fail are reported. The script fails when a mutant's code is not found
# exactly once in its declaration (renamed, moved to another package or
# changed: update the mutant), when a mutant does not compile, when the
# unmutated copy does not pass, and when no test catches a mutant (add a
# test that does).
#
# Mutants marked root run privileged tests (TestPrivileged*); without root
# they cannot be caught, and the script says so and fails. Needs: go; as
# root, what scripts/test-root.sh needs.
set -euo pipefail
cd "$(dirname "$0")/.."

# mutant NAME WHERE PACKAGES RUN OLD NEW
#   WHERE: the declaration OLD is in, as its package's directory, a dot and
#   its name: 'driver/gid.moved', 'driver/gid.(*Tracker).checkDrift', a
#   const, var or type's name (tools/mutant); PACKAGES: go packages to test
#   (space separated); RUN: -run regex, or "" for every test of those
#   packages; a RUN naming TestPrivileged marks a mutant that needs root.
#   Name the tests that catch it where the package's whole suite is slow
#   (the driver's takes about 20 s a mutant).
names=() wheres=() pkgs=() runs=() olds=() news=()
mutant() {
  names+=("$1") wheres+=("$2") pkgs+=("$3") runs+=("$4") olds+=("$5") news+=("$6")
}

unit=./driver/
gids='./driver/gid/ ./driver/'

# GID admission: a container that fits exactly is admitted, one entry more
# is refused.
mutant admission-refuses-exact-fit 'driver/gid.(*Tracker).reserve' "$gids" 'TestAdmitUpToCapacity|TestRDMAAdmissionUpToCapacity' \
  'if e.need <= free-held {' \
  'if e.need < free-held {'
mutant admission-overcommits-by-one 'driver/gid.(*Tracker).reserve' "$gids" 'TestAdmitUpToCapacity|TestRDMAAdmissionUpToCapacity' \
  'if e.need <= free-held {' \
  'if e.need <= free-held+1 {'
# The room the status and the metrics report is admission's: the entries
# held for containers not in the table yet are not room.
mutant room-ignores-held 'driver/gid.(*Tracker).Room' './driver/gid/ ./plugin/' 'TestAdmitAtTheTableEdge|TestMetricsMatchStatus' \
  'return table, max(free-held, 0), nil' \
  'return table, max(free-0*held, 0), nil'
# A refusal is decided on a read of every slot, never on a snapshot. (Using
# the snapshot at all only saves reads: a cost, which the benchmarks
# measure; ignoring it breaks no rule a test can see.)
mutant refusal-on-snapshot 'driver/gid.(*Tracker).Admit' "$gids" 'TestAdmitRefusesOnlyOnAFullRead|TestRefusalReadsTheWholeTable' \
  'if !full && how != readFull {' \
  'if false && !full && how != readFull {'
# Free slots are those the kernel hands out: never the reserved default
# slots, never the slots it passed over (a deleted entry a QP still holds
# reads empty), until the kernel fills them or the evidence is too old.
mutant admission-counts-reserved-slots 'driver/gid.freeFor' "$gids" 'TestAdmitAtTheTableEdge|TestPassedOver' \
  'for i := types; i < len(table.Slots); i++ {' \
  'for i := 0; i < len(table.Slots); i++ {'
mutant admission-ignores-passed-over 'driver/gid.passedOver' "$gids" 'TestAdmitAtTheTableEdge|TestPassedOver' \
  'if prev[i] == "" && cur[i] == "" {' \
  'if false && prev[i] == "" && cur[i] == "" {'
mutant passed-over-never-expires 'driver/gid.freeFor' "$gids" 'TestAdmitAtTheTableEdge|TestPassedOver' \
  'if at, ok := skipped[i]; ok && now.Sub(at) < skipMemory {' \
  'if _, ok := skipped[i]; ok {'
mutant passed-over-kept-when-filled 'driver/gid.passedOver' "$gids" 'TestAdmitAtTheTableEdge|TestPassedOver' \
  'if i < len(cur) && cur[i] == "" && now.Sub(at) < skipMemory {' \
  'if i < len(cur) && now.Sub(at) < skipMemory {'
# The fake kernel passes over pending-delete slots and reserved default
# slots, as the real one does (the admission tests rest on it).
mutant fake-kernel-fills-pending-slot 'rdma/rdmatest.AddAddress' './rdma/rdmatest/ ./driver/gid/' '' \
  'for next < len(slots) && (slots[next].GID != ZeroGID || pending[next]) {' \
  'for next < len(slots) && slots[next].GID != ZeroGID {'
mutant fake-kernel-fills-reserved-slot 'rdma/rdmatest.AddAddress' './rdma/rdmatest/ ./driver/gid/' '' \
  'next := reserved' \
  'next := 0'
# The orphan sweep at start: deletes this instance's unrecorded links, keeps
# recorded ones.
mutant orphan-sweep-disabled 'driver.(*Driver).restore' "$unit" 'TestOrphanSweepDeletesOnlyOwnOrphans|TestVLANOwnerMark|TestInstanceIDRecoveredFromLinks' \
  'd.sweepOrphans(log)' \
  '0, error(nil)'
mutant orphan-sweep-ignores-records 'driver.(*Driver).sweepOrphans' "$unit" 'TestOrphanSweepDeletesOnlyOwnOrphans|TestVLANOwnerMark|TestInstanceIDRecoveredFromLinks' \
  'owned[e.Ifname] = true' \
  'owned[e.Ifname] = false'
mutant orphan-sweep-ignores-owner 'driver.(*Driver).sweepOrphans' "$unit" 'TestOrphanSweepDeletesOnlyOwnOrphans|TestVLANOwnerMark|TestInstanceIDRecoveredFromLinks' \
  'ours := l.Alias == d.owner' \
  'ours := true'
# An unmarked container link (a crash between creating and marking it) is
# swept on the parent of one of this instance's networks, unless a record
# names it; never on another parent.
mutant orphan-sweep-keeps-unmarked 'driver.(*Driver).sweepOrphans' "$unit" 'TestOrphanSweep' \
  'unmarked := l.Alias == "" && !owned[l.Name] && ourParent[l.ParentIndex] &&' \
  'unmarked := false && l.Alias == "" && !owned[l.Name] && ourParent[l.ParentIndex] &&'
mutant orphan-sweep-unmarked-any-parent 'driver.(*Driver).sweepOrphans' "$unit" 'TestOrphanSweep' \
  'unmarked := l.Alias == "" && !owned[l.Name] && ourParent[l.ParentIndex] &&' \
  'unmarked := l.Alias == "" && !owned[l.Name] && true &&'
mutant orphan-sweep-unmarked-ignores-records 'driver.(*Driver).sweepOrphans' "$unit" 'TestOrphanSweep' \
  'unmarked := l.Alias == "" && !owned[l.Name] && ourParent[l.ParentIndex] &&' \
  'unmarked := l.Alias == "" && ourParent[l.ParentIndex] &&'
# The CDI spec holds uverbs and rdma_cm only: never umad (fabric management).
mutant cdi-lists-umad 'rdma.(*Sysfs).DeviceNodes' './rdma/ ./driver/' 'TestDeviceNodes|TestRDMACDISpecLifecycle' \
  'nodes = append(nodes, DeviceNode{Path: filepath.Join(DevDir, "rdma_cm")' \
  'nodes = append(nodes, DeviceNode{Path: filepath.Join(DevDir, "umad0"), Major: 231, Minor: 0, Type: "c"}); nodes = append(nodes, DeviceNode{Path: filepath.Join(DevDir, "rdma_cm")'
# The GID index reported is the table slot the entry is in.
mutant wrong-gid-index 'driver/gid.(*Tracker).foundIn' "$gids" 'TestRDMAReadinessLateGIDAndIndexHole|TestWatchReportsTheEntriesFound' \
  'Entry{Index: i,' \
  'Entry{Index: i + 1,'
# -o rdma_device picks the named device among a parent's candidates.
mutant override-picks-another-device 'driver.(*Driver).overrideRDMA' "$unit" 'TestRDMADeviceOverride' \
  'if c.HCA == override {' \
  'if c.HCA != override {'
# The exclusive RDMA netns mode is refused.
mutant exclusive-netns-accepted 'driver.(*Driver).detectRDMA' "$unit" 'TestRDMARefusals' \
  'if mode != rdma.NetnsShared {' \
  'if false && mode != rdma.NetnsShared {'
# State files are private.
mutant state-file-world-readable 'driver.writeJSONAtomic' "$unit" 'TestStoreRoundTrip' \
  'atomicfile.Write(path, data, 0o600,' \
  'atomicfile.Write(path, data, 0o644,'
# Atomic replacement: a temporary file renamed over the old one, removed
# when the write fails.
mutant write-in-place 'internal/atomicfile.write' './driver/ ./internal/atomicfile/' 'TestWriteTouchesTheFileOnlyByRename|TestWriteCrashLeavesOldContent|TestStoreFailedWriteKeepsOld' \
  'os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")' \
  'os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)'
mutant failed-write-leaves-temp 'internal/atomicfile.write' './driver/ ./internal/atomicfile/' 'TestWriteFailureKeepsOldContent|TestWriteRenameAndCreateFailures|TestStoreFailedWriteKeepsOld' \
  '_ = os.Remove(tmp)' \
  '_ = tmp'
# Files of the state and CDI directories: what is not a regular file is
# refused before it is opened (a device, a FIFO, a socket).
mutant safefile-opens-special-files 'internal/safefile.Open' './internal/safefile/' '' \
  'os.Lstat(path); err == nil &&' \
  'os.Lstat(path); false && err == nil &&'
# The CDI directory is shared: a file of another kind at a spec's path is
# not the plugin's to replace or remove.
mutant cdi-adopts-other-kinds 'cdi.ReadSpec' './cdi/ ./driver/' 'TestCDIDirHostileFiles|TestReadCDISpecRefusesWhatThePluginDidNotWrite' \
  'if spec.Kind != Kind {' \
  'if false && spec.Kind != Kind {'
# CDI file I/O never holds the driver's lock.
# (writeCDI takes d.mu itself to record the nodes: the mutant takes it before
# the write instead, not around the whole call, which would deadlock on the
# first network and be caught only by go test's timeout.)
mutant cdi-write-under-lock 'driver.(*Driver).writeCDI' "$unit" 'TestCDIFileIOHoldsNoLock' \
  'd.beforeCDIIO("write", cdi.SpecPath(d.cdiDir, name))
	tc, sl := d.portQoS(name, adding, except, log)
	path, err := cdi.WriteSpec(d.cdiDir, cdi.Device{Name: name, HCA: r.HCA, Port: r.Port, Nodes: nodes, Netdev: r.Netdev, Owner: d.owner,
		TrafficClass: tc, ServiceLevel: sl})
	if err != nil {
		return fmt.Errorf("write CDI spec for %s in %s: %w (check --cdi-dir, or the plugin'"'"'s cdi mount)", name, d.cdiDir, err)
	}
	d.mu.Lock()
	d.cdiNodes[name] = nodes' \
  'tc, sl := d.portQoS(name, adding, except, log)
	d.mu.Lock()
	d.beforeCDIIO("write", cdi.SpecPath(d.cdiDir, name))
	path, err := cdi.WriteSpec(d.cdiDir, cdi.Device{Name: name, HCA: r.HCA, Port: r.Port, Nodes: nodes, Netdev: r.Netdev, Owner: d.owner,
		TrafficClass: tc, ServiceLevel: sl})
	if err != nil {
		d.mu.Unlock()
		return fmt.Errorf("write CDI spec for %s in %s: %w (check --cdi-dir, or the plugin'"'"'s cdi mount)", name, d.cdiDir, err)
	}
	d.cdiNodes[name] = nodes'
# DeleteNetwork runs alone among the calls that change the networks: it
# never removes the spec of a port a racing CreateNetwork takes up.
mutant delete-network-unserialized 'driver.(*Driver).DeleteNetwork' "$unit" 'TestCDISpecFollowsRacingNetworks' \
  'defer d.netsMu.Unlock()
	log := d.logFor("DeleteNetwork"' \
  'd.netsMu.Unlock()
	log := d.logFor("DeleteNetwork"'
# Join re-creates a link lost since CreateEndpoint.
mutant join-does-not-recreate-link 'driver.(*Driver).Join' "$unit" 'TestJoinRecreatesLostLink' \
  'err = d.ensureLink(&e.endpoint, log)' \
  'err = error(nil)'
# A parent that is a port of a bond, bridge, team or OVS datapath (which
# hold its receive handler: the kernel answers EBUSY) is refused in words at
# CreateNetwork, on fake links and on a real bridge; a VRF port, whose
# receive handler is free, is not; a parent enslaved later is explained at
# CreateEndpoint and Join instead of a bare EBUSY.
mutant enslaved-parent-accepted 'driver.(*Driver).rxMaster' "$unit" 'TestParentPortOfMasterRefused' \
  'if l.MasterIndex == 0 {' \
  'if true || l.MasterIndex == 0 {'
mutant master-index-unread 'netns.toLink' './plugin/' 'TestPrivilegedEnslavedParent' \
  'MasterIndex: a.MasterIndex,' \
  'MasterIndex: 0,'
# Duplicate addresses across hosts: the probe finds another host holding
# the address through the real kernel, never the endpoint itself; the driver
# records it off the start path, refuses it on a strict network before Join
# answers, and forgets it when the container leaves.
mutant probe-own-mac-counted 'netns.(*Handle).ProbeAddress' './netns/' 'TestPrivilegedProbeAddress' \
  'if mac == nil || slices.Equal(mac, own) ||' \
  'if mac == nil ||'
mutant probe-ndp-checksum-unset 'netns.dadSolicitation' './netns/' 'TestPrivilegedProbeAddress' \
  'binary.BigEndian.PutUint16(icmp[2:], icmpv6Checksum(src, group, icmp))' \
  '_ = icmpv6Checksum'
# The watch of the parent's segment: another host's probe for an endpoint's
# address is seen through the real kernel (the IPv6 filter lets the DAD
# solicitation through; a frame to a device on top of the parent is not the
# parent's), is a conflict unless the MAC is the endpoint's
# own, a later frame of the holder says it holds it, and the watch resumes
# after a restart and after a failure, and ends with the parent's last
# endpoint.
mutant claim-watch-nd-filtered 'netns.attachNDFilter' './netns/' 'TestPrivilegedWatchClaims' \
  '{Code: jeq, Jt: 1, K: 135},' \
  '{Code: jeq, Jt: 1, K: 134},'
mutant claim-parent-mac-counted 'netns.(*Handle).WatchClaims' './netns/' 'TestPrivilegedWatchClaims' \
  'if c, ok := parseClaim(buf[:n]); ok && !slices.Equal(c.MAC, l.MAC) {' \
  'if c, ok := parseClaim(buf[:n]); ok {'
mutant claim-upper-device-counted 'netns.recvOn' './netns/' 'TestPrivilegedWatchClaims' \
  'ok && ll.Ifindex == ifindex && ll.Pkttype != unix.PACKET_OTHERHOST {' \
  'ok && ll != nil {'
mutant claim-own-mac-counted 'driver.(*Driver).claimSeen' "$unit" 'TestAddressClaimsWatchedOnSegment' \
  'if e.Parent != parent || e.Sandbox == "" || strings.EqualFold(e.MAC, m) ||' \
  'if e.Parent != parent || e.Sandbox == "" ||'
mutant claim-probed-kept 'driver.(*Driver).recordConflicts' "$unit" 'TestAddressClaimsWatchedOnSegment' \
  '} else if !c.Probed {' \
  '} else if false {'
mutant claim-watch-not-resumed 'driver.(*Driver).restore' "$unit" 'TestAddressClaimsWatchedOnSegment' \
  'd.watchParent(e.Parent)' \
  '_ = e'
mutant claim-watch-never-ends 'driver.(*Driver).watchUntilIdle' "$unit" 'TestAddressClaimsWatchedOnSegment' \
  'if !still {' \
  'if !still && false {'
mutant claim-watch-not-retried 'driver.(*Driver).unwatch' "$unit" 'TestAddressWatchRetried' \
  'if d.probeCtx.Err() == nil && d.watched(parent) {' \
  'if false {'
mutant address-conflict-unrecorded 'driver.(*Driver).recordConflicts' "$unit" 'TestAddressConflictReportedAfterJoin' \
  '	e.Conflicts = found
	for _, c := range found {' \
  '	for _, c := range found {'
mutant address-probe-on-start-path 'driver.(*Driver).Join' "$unit" 'TestAddressConflictReportedAfterJoin' \
  'if err == nil && check == api.AddressCheckStrict && d.probe != nil {' \
  'if err == nil && check != api.AddressCheckOff && d.probe != nil {'
mutant address-strict-unprobed 'driver.(*Driver).Join' "$unit" 'TestAddressCheckStrictAndOff' \
  'if err == nil && check == api.AddressCheckStrict && d.probe != nil {' \
  'if false && err == nil && check == api.AddressCheckStrict && d.probe != nil {'
mutant address-conflict-kept-after-leave 'driver.(*Driver).Leave' "$unit" 'TestAddressConflictReportedAfterJoin' \
  'e.Sandbox, e.GIDs, e.RDMAReady, e.RDMAReason, e.Conflicts = "", nil, false, "", nil' \
  'e.Sandbox, e.GIDs, e.RDMAReady, e.RDMAReason = "", nil, false, ""'
mutant address-conflicts-uncounted 'metrics.Gauges' './metrics/' 'TestGaugesCountAddressConflicts' \
  'g.Conflicts += len(e.AddressConflicts)' \
  'g.Conflicts += 0'
mutant vrf-port-refused 'driver.rxMasters' "$unit" 'TestParentPortOfVRFAccepted' \
  '"hsr":         "HSR/PRP device",' \
  '"hsr":         "HSR/PRP device", "vrf": "VRF",'
mutant vlan-on-port-accepted 'driver.(*Driver).planParent' "$unit" 'TestParentPortOfMasterRefused' \
  'if err := d.checkStackMasters(name, true, vlans, real); err != nil {' \
  'if err := error(nil); err != nil {'
# An existing VLAN (or a QinQ stack) whose lower device, or any device
# under it, is a port of such a master is refused as a new one is.
mutant vlan-stack-on-port-accepted 'driver.(*Driver).planParent' "$unit" 'TestQinQParent' \
  'if err := d.checkStackMasters(name, false, vlans, bottom); err != nil {' \
  'if err := error(nil); err != nil {'
# QinQ: a parent's RDMA device is under every VLAN of it, not one level
# down.
mutant qinq-one-level 'driver.(*Driver).vlanStack' "$unit" 'TestQinQParent' \
  'for l.Kind == "vlan" {' \
  'for len(vlans) == 0 && l.Kind == "vlan" {'
# QinQ on a NIC that tags RoCE frames itself (mlx5: one VLAN per GID
# entry) is refused, at CreateNetwork and in the status; Soft-RoCE, which
# sends through the netdev stack, keeps it; rxe is known by its node_desc
# before its device link (older kernels linked it to the NIC's device).
mutant qinq-on-nic-accepted 'driver.(*Driver).planNetwork' "$unit" 'TestQinQParentRefusedWhereTheNICTags' \
  'if err := d.checkStackedVLANTags(opts.Parent, plan.createVLAN, plan.vlans, plan.real, rinfo.HCA); err != nil {' \
  'if err := error(nil); err != nil {'
mutant qinq-on-nic-problem-unseen 'driver.(*Driver).Status' "$unit" 'TestQinQParentRefusedWhereTheNICTags' \
  'if p := d.stackedVLANProblem(n); p != "" {' \
  'if p := d.stackedVLANProblem(n); false && p != "" {'
mutant qinq-refused-on-rxe 'driver.(*Driver).checkStackedVLANTags' "$unit" 'TestQinQParent' \
  'if drv == rdma.DriverRXE {' \
  'if false && drv == rdma.DriverRXE {'
mutant rxe-driver-from-device-link 'rdma.(*Sysfs).KernelDriver' ./rdma/ 'TestKernelDriver' \
  'if v, ok := readAttr(filepath.Join(dir, "node_desc")); ok && v == DriverRXE {' \
  'if v, ok := readAttr(filepath.Join(dir, "node_desc")); false && ok && v == DriverRXE {'
# A bond without RoCE LAG whose ports have RDMA devices of their own is
# refused; only the netdev a port's default GID names is the port's own
# (the active port's table also holds the bond's default GID).
mutant bond-without-lag-accepted 'driver.(*Driver).checkBondPorts' "$unit" 'TestBondWithoutLAGRefused|TestRoCELAGParent' \
  'if len(withRDMA) == 0 {' \
  'if true || len(withRDMA) == 0 {'
mutant bond-own-port-by-gid-scan 'driver.(*Driver).ownPorts' "$unit" 'TestBondWithoutLAGRefused|TestRoCELAGParent' \
  'if d.rdma.PortNetdev(c.HCA, c.Port) == l.Name {' \
  'if true || d.rdma.PortNetdev(c.HCA, c.Port) == l.Name {'
# A parent's port is the kernel's (RDMA netlink) first, on the host's own
# sysfs only, and only when sysfs shows that port too.
mutant kernel-port-view-ignored 'driver.(*Driver).hcaPortsForNetdev' "$unit" 'TestParentPortFromKernelView' \
  'if view, ok := d.kernelPortView(); ok {' \
  'if view, ok := d.kernelPortView(); false && ok {'
mutant kernel-port-view-unchecked 'driver.(*Driver).kernelPortsOf' "$unit" 'TestParentPortFromKernelView' \
  'if err != nil || !slices.Contains(sysPorts, p.Port) {' \
  'if false && (err != nil || !slices.Contains(sysPorts, p.Port)) {'
mutant kernel-port-view-on-fake-sysfs 'driver.New' "$unit" 'TestKernelViewOnlyOnHostSysfs' \
  'if cfg.Sysfs.Host() {' \
  'if true || cfg.Sysfs.Host() {'
# The kernel's view decides: a netdev it ties no port to has none, whatever
# GID tables hold its entries (a bond's, in its ports' tables).
mutant kernel-view-not-authoritative 'driver.(*Driver).ownPorts' "$unit" 'TestBondWithoutLAGRefusedByTheKernelsView' \
  'if !viewNames(view, l) {' \
  'if false && !viewNames(view, l) {'
# A network whose bond lost its own device says so in its status.
mutant bond-problem-unseen 'driver.(*Driver).Status' "$unit" 'TestBondThatLostItsDeviceIsAProblem' \
  'if p := d.bondProblem(n); p != "" {' \
  'if p := d.bondProblem(n); false && p != "" {'
# CreateNetwork dumps the host's links only to find a master's ports (a
# dump fails while links churn); a dump the kernel interrupts is tried
# again after a growing pause, and one that never settles says so.
mutant create-network-dumps-links 'driver.(*Driver).checkBondPorts' "$unit" 'TestCreateNetworkWhileLinksChurn' \
  'if _, master := rxMasters[real.Kind]; !master {' \
  'if _, master := rxMasters[real.Kind]; false && !master {'
mutant dump-retried-without-pause 'netns.redump' ./netns/ 'TestLinksRetriesAnInterruptedDumpAfterAPause' \
  'time.Sleep(p)' \
  '_ = p'
mutant dump-interrupted-unexplained 'netns.redump' ./netns/ 'TestLinksRetriesAnInterruptedDumpAfterAPause' \
  'return zero, fmt.Errorf("%s kept changing while the kernel listed it (%d tries over %s, each cut short by a change): retry in a moment: %w",' \
  'return zero, fmt.Errorf("%.0s%.0d%.0s%w",'
# The managed plugin's /host/sys, a sysfs mount, is the kernel's sysfs.
mutant managed-sysfs-not-host 'rdma.(*Sysfs).Host' ./rdma/ 'TestHostSysfs' \
  'return unix.Statfs(s.path("sys"), &st) == nil && st.Type == unix.SYSFS_MAGIC' \
  'return false && unix.Statfs(s.path("sys"), &st) == nil && st.Type == unix.SYSFS_MAGIC'
mutant enslaved-endpoint-bare-ebusy 'driver.(*Driver).explainBusy' "$unit" 'TestParentEnslavedAfterCreation' \
  'if !errors.Is(err, unix.EBUSY) {' \
  'if true || !errors.Is(err, unix.EBUSY) {'
mutant enslaved-join-bare-ebusy 'driver.(*Driver).ensureLink' "$unit" 'TestParentEnslavedAfterCreation' \
  'if err := d.explainBusy(e.NetworkID, e.Parent, err); IsRefusal(err) {' \
  'if err := d.explainBusy(e.NetworkID, e.Parent, err); false && IsRefusal(err) {'
# Every crash point is reached by the crash test (a point dropped from the
# code is noticed).
mutant crash-point-unreached 'driver.(*Driver).ensureLink' './cmd/rdma-macvlan/' 'TestPrivilegedCrashPoints' \
  'crashPoint("join:link-recreated")' \
  ''
# docker rdma asks the engine the docker CLI would use, by the CLI's rules
# in the CLI's order, and its API only on a local unix socket without TLS.
drdocker=./cmd/docker-rdma/internal/docker/
mutant endpoint-docker-host-ignored 'cmd/docker-rdma/internal/docker.ResolveEndpoint' "$drdocker" 'TestResolveEndpoint' \
  'case getenv("DOCKER_HOST") != "":' \
  'case false:'
mutant endpoint-context-before-host 'cmd/docker-rdma/internal/docker.ResolveEndpoint' "$drdocker" 'TestResolveEndpoint' \
  'case getenv("DOCKER_HOST") != "":' \
  'case getenv("DOCKER_HOST") != "" && getenv("DOCKER_CONTEXT") == "":'
mutant endpoint-current-context-ignored 'cmd/docker-rdma/internal/docker.ResolveEndpoint' "$drdocker" 'TestResolveEndpoint' \
  'if cfg.CurrentContext != "" {' \
  'if false {'
mutant endpoint-docker-config-ignored 'cmd/docker-rdma/internal/docker.configDir' "$drdocker" 'TestResolveEndpoint' \
  'if d := getenv("DOCKER_CONFIG"); d != "" {' \
  'if d := ""; d != "" {'
mutant endpoint-context-tls-ignored 'cmd/docker-rdma/internal/docker.contextEndpoint' "$drdocker" 'TestResolveEndpoint' \
  'if ents, err := os.ReadDir(tlsDir); err == nil && len(ents) > 0 {' \
  'if ents, err := os.ReadDir(tlsDir); err == nil && len(ents) > 99 {'
mutant endpoint-tls-flags-ignored 'cmd/docker-rdma/internal/docker.defaultEndpoint' "$drdocker" 'TestResolveEndpoint' \
  'if g.on(f) {' \
  'if false {'
mutant endpoint-tcp-taken-as-socket 'cmd/docker-rdma/internal/docker.UnixSocket' "$drdocker" 'TestResolveEndpoint' \
  'if !ok || strings.Contains(path, "://") {' \
  'if !ok && false {'
# The API is asked in the engine's version, never above MaxAPIVersion; a
# question it does not answer goes to the docker CLI.
mutant api-version-not-capped 'cmd/docker-rdma/internal/docker.(*API).Version' "$drdocker" '' \
  'if mv, _ := parseVersion(MaxAPIVersion); lessVersion(mv, sv) {' \
  'if mv, _ := parseVersion(MaxAPIVersion); lessVersion(mv, sv) && false {'
mutant api-error-not-asked-again 'cmd/docker-rdma/internal/docker.fromAPI' "$drdocker ./cmd/docker-rdma/internal/commands/" 'TestCLIAsksTheAPIFirst|TestRunAPIPath' \
  'c.Debugf("%v: asking the docker CLI instead", err)
		return v, false, nil' \
  'return v, true, nil'
# Every question to the engine has a deadline and every answer a size
# bound, by the API and by the docker CLI; an engine that did not answer
# in time, or answered too much, is not asked again with the docker CLI.
mutant api-no-deadline 'cmd/docker-rdma/internal/docker.(*API).fetch' "$drdocker" 'TestAPIDeadline' \
  'rctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errNoAnswer)' \
  'rctx, cancel := context.WithTimeoutCause(ctx, 1000*a.timeout, errNoAnswer)'
mutant api-answer-unbounded 'cmd/docker-rdma/internal/docker.(*API).fetch' "$drdocker" 'TestAPIAnswerBound' \
  'if int64(len(body)) > a.maxAnswer {' \
  'if false {'
mutant api-stuck-engine-asked-again 'cmd/docker-rdma/internal/docker.fromAPI' "$drdocker" 'TestAPIDeadline|TestAPIAnswerBound' \
  'if final(err) {' \
  'if false {'
mutant cli-query-no-deadline 'cmd/docker-rdma/internal/docker.(*CLI).query' "$drdocker" 'TestCLIDeadline' \
  'qctx, cancel := context.WithTimeoutCause(ctx, t, errNoAnswer)' \
  'qctx, cancel := context.WithTimeoutCause(ctx, 1000*t, errNoAnswer)'
mutant cli-output-unbounded 'cmd/docker-rdma/internal/docker.(*CLI).Output' "$drdocker" 'TestCLIOutputBound' \
  'if stdout.over {' \
  'if false {'
# A file the user points docker rdma at (.env, --env-file, the docker
# CLI's config and contexts) is read only if it is a regular file, and
# never past a bound.
mutant user-file-not-regular 'cmd/docker-rdma/internal/userfile.check' './cmd/docker-rdma/internal/userfile/ ./cmd/docker-rdma/internal/compose/ ./cmd/docker-rdma/internal/docker/' 'TestRead|TestConfigFilesReadsOnlyRegularEnvFiles|TestResolveEndpointReadsOnlyRegularFiles' \
  'if !fi.Mode().IsRegular() {' \
  'if false {'
mutant user-file-read-past-bound 'cmd/docker-rdma/internal/userfile.Read' ./cmd/docker-rdma/internal/userfile/ 'TestRead' \
  'if int64(len(b)) > max {' \
  'if false {'
# doctor's fabric checks: the PFC bitmap read from the wrong byte of struct
# ieee_pfc, the RoCE headers miscounted, a NIC without DCB taken for an
# error, the traffic class not shifted to its DSCP.
mutant dcb-pfc-offset 'cmd/docker-rdma/internal/fabric.pfcEnOff' ./cmd/docker-rdma/internal/fabric/ '' \
  'pfcEnOff       = 1' \
  'pfcEnOff       = 2'
mutant roce-mtu-headers 'cmd/docker-rdma/internal/fabric.RoCEHeaders' ./cmd/docker-rdma/internal/fabric/ '' \
  'const RoCEHeaders = 40 + 8 + 12 + 4 + 28 + 4' \
  'const RoCEHeaders = 40 + 8 + 12 + 28 + 4'
mutant dcb-unsupported-is-an-error 'cmd/docker-rdma/internal/fabric.ReadDCB' ./cmd/docker-rdma/internal/fabric/ '' \
  'errors.Is(err, syscall.EOPNOTSUPP)' \
  'errors.Is(err, syscall.ENOTSUP+1)'
mutant traffic-class-not-dscp 'cmd/docker-rdma/internal/fabric.(*Report).checkTrafficClass' ./cmd/docker-rdma/internal/fabric/ '' \
  'code := tc >> 2' \
  'code := tc >> 3'
# ConnectX has no dcb apptrust: on mlx5 doctor's trust fix adds a DSCP
# entry (or uses mlnx_qos); MLNX_OFED's qos/trust is read before the trust
# is taken for PCP.
mutant trust-fix-apptrust-on-mlx5 'cmd/docker-rdma/internal/fabric.(*Report).trustDSCPFix' ./cmd/docker-rdma/internal/fabric/ 'TestTrustFixPerDriver' \
  'if !r.mlx5() {' \
  'if true || !r.mlx5() {'
mutant qos-trust-file-unread 'cmd/docker-rdma/internal/fabric.(*Report).trustsDSCP' ./cmd/docker-rdma/internal/fabric/ 'TestTrustFixPerDriver' \
  'if r.QoSTrust != "" {' \
  'if false && r.QoSTrust != "" {'
# The traffic class doctor suggests is DSCP 26 where it maps to a PFC
# priority, with ECT(0) in the ECN bits (106) where ECN is on for it.
mutant example-tc-not-dscp-26 'cmd/docker-rdma/internal/fabric.(*Report).exampleTC' ./cmd/docker-rdma/internal/fabric/ 'TestCheck|TestExampleTrafficClass' \
  'if code == roceDSCP {' \
  'if false && code == roceDSCP {'
mutant example-tc-ignores-ecn 'cmd/docker-rdma/internal/fabric.(*Report).exampleTC' ./cmd/docker-rdma/internal/fabric/ 'TestExampleTrafficClass' \
  'if r.ECN != nil && (r.ECN.NP != nil && r.ECN.NP[prio] || r.ECN.RP != nil && r.ECN.RP[prio]) {' \
  'if false && r.ECN != nil && (r.ECN.NP != nil && r.ECN.NP[prio] || r.ECN.RP != nil && r.ECN.RP[prio]) {'
# doctor's GPU topology: two switches taken for one, root ports of one host
# bridge taken for one switch.
mutant topo-pix-too-wide 'cmd/docker-rdma/internal/gpu.Link' ./cmd/docker-rdma/internal/gpu/ '' \
  'if len(a.Path)-c <= 2 && len(b.Path)-c <= 2 {' \
  'if len(a.Path)-c <= 4 && len(b.Path)-c <= 4 {'
mutant topo-no-phb 'cmd/docker-rdma/internal/gpu.Link' ./cmd/docker-rdma/internal/gpu/ '' \
  'if c == 0 {' \
  'if c == 99 {'
# Metrics: the gauges are /v1/status's numbers (headroom per RoCE type, a
# port once), readiness reasons bounded; refusals, outcomes, state write
# failures and the Join-to-ready time counted; the TCP address serves
# /metrics only and a wrong one names the flag.
metricspkgs='./metrics/ ./plugin/'
mutant metrics-headroom-not-per-type 'metrics.Gauges' "$metricspkgs" 'TestGauges|TestMetrics' \
  'Headroom: room(n.GIDTable) / max(n.RoCETypes, 1)})' \
  'Headroom: room(n.GIDTable)})'
mutant metrics-port-counted-twice 'metrics.Gauges' "$metricspkgs" 'TestGauges|TestMetrics' \
  'if !seen[k] {' \
  'if true {'
mutant metrics-timeout-reason-lost 'metrics.Readiness' "$metricspkgs" 'TestReadiness|TestMetrics' \
  'case strings.HasPrefix(r, "GID entries for ") && strings.Contains(r, "did not appear"):' \
  'case false:'
mutant metrics-refusal-not-counted 'plugin.(*callWriter).refused' ./plugin/ 'TestMetrics' \
  'm.Refusal(reason)' \
  '_ = reason'
mutant metrics-strict-not-a-refusal 'plugin.refusalReason' ./plugin/ 'TestMetrics' \
  'case is[*driver.StrictNotReadyError](err):' \
  'case false && is[*driver.StrictNotReadyError](err):'
mutant metrics-outcome-lost 'plugin.(*Server).counted' ./plugin/ 'TestMetrics' \
  'outcome := w.outcome' \
  'outcome := ""'
mutant metrics-write-failure-as-ok 'driver.(*observing).stateWrite' ./plugin/ 'TestMetrics' \
  'outcome = "failed"' \
  'outcome = "ok"'
mutant metrics-ready-time-not-observed 'driver.(*observing).watchEnded' ./plugin/ 'TestMetrics' \
  'ob.o.GIDsReady(max(at.Sub(joined), 0))' \
  '_ = joined'
mutant metrics-address-serves-all 'cmd/rdma-macvlan.serveMetrics' ./cmd/rdma-macvlan/ 'TestMetricsAddress' \
  'mux.HandleFunc(metrics.Path, func(' \
  'mux.HandleFunc("/", func('
mutant metrics-address-error-unnamed 'cmd/rdma-macvlan.listenMetrics' ./cmd/rdma-macvlan/ 'TestMetricsAddress' \
  'const name = "--metrics-address (RDMA_MACVLAN_METRICS_ADDRESS)"' \
  'const name = "metrics address"'
# The metrics address caps its connections, and its cap and the plugin
# socket's together fit under the limit on file descriptors; a GET with a
# body is refused, not answered with the body left unread.
mutant metrics-address-uncapped 'cmd/rdma-macvlan.serveMetrics' ./cmd/rdma-macvlan/ 'TestMetricsAddress' \
  'cl := connlimit.New(l, maxConns, func(closed int64) {' \
  'cl, _ := l, connlimit.New(l, maxConns, func(closed int64) {'
mutant metrics-address-serves-body 'cmd/rdma-macvlan.serveMetrics' ./cmd/rdma-macvlan/ 'TestMetricsAddress' \
  'if r.ContentLength != 0 {' \
  'if false && r.ContentLength != 0 {'
mutant conn-caps-overrun-fds 'internal/connlimit.Caps' ./internal/connlimit/ 'TestCapsFitTheFileLimit' \
  'caps[i] = f + int(uint64(w-f)*(room-floors)/(total-floors))' \
  'caps[i] = w'

# An endpoint whose watch timed out before its entries came is recorded
# ready by the first status read that finds them, so its moves are reported.
mutant late-ready-never-recorded 'driver.(*Driver).Status' ./driver/ 'TestLateReady' \
  '} else if es.RDMAReady && !watching[e.ID] {' \
  '} else if false && es.RDMAReady && !watching[e.ID] {'

# GPU placement as NCCL decides GPUDirect RDMA: beyond PXB (its default
# NCCL_NET_GDR_LEVEL) a warning; an mlx5 sub-function sits at its function.
mutant gdr-beyond-pxb-fine 'cmd/docker-rdma/internal/commands.(*doctor).checkGPUs' ./cmd/docker-rdma/internal/commands/ 'TestDoctorGPU' \
  'case gpu.PIX, gpu.PXB:' \
  'case gpu.PIX, gpu.PXB, gpu.PHB, gpu.NODE:'
mutant sub-function-unplaced 'cmd/docker-rdma/internal/gpu.place' ./cmd/docker-rdma/internal/gpu/ '' \
  'if len(d.Path) > 0 && auxRE.MatchString(p) && i == len(parts)-host-2 {' \
  'if false && len(d.Path) > 0 && auxRE.MatchString(p) && i == len(parts)-host-2 {'

# A bond parent is checked on its ports, and ports that disagree are said.
mutant bond-ports-unchecked 'cmd/docker-rdma/internal/fabric.Check' ./cmd/docker-rdma/internal/fabric/ 'TestBond' \
  'if real.Name == r.DCBNetdev && len(real.Ports) > 0 {' \
  'if false && real.Name == r.DCBNetdev && len(real.Ports) > 0 {'
mutant bond-ports-disagree-unseen 'cmd/docker-rdma/internal/fabric.(*Report).checkBond' ./cmd/docker-rdma/internal/fabric/ 'TestBond' \
  'if len(seen) > 1 {' \
  'if len(seen) > 2 {'

# A device registered again while running (another uverbs node): the
# status says so and rewrites the spec, and so does the next CreateEndpoint.
mutant reregistration-unseen-by-status 'driver.(*Driver).rdmaStatus' ./driver/ 'TestReregistered' \
  'if p := specProblem(*r, w, nodes); p != "" {' \
  'if p := specProblem(*r, w, nodes); false && p != "" {'
mutant reregistration-unseen-at-start 'driver.(*Driver).CreateEndpoint' ./driver/ 'TestReregistered' \
  'd.recheckHCA(req.NetworkID, d.logFor("CreateEndpoint", nil))' \
  '// no recheck'

# docker rdma selftest removes its containers, also after a failure, and
# stops at the first failing step.
mutant selftest-leaves-containers 'cmd/docker-rdma/internal/commands.cmdSelftest' ./cmd/docker-rdma/internal/commands/ 'TestSelftest' \
  '	defer t.cleanup()' \
  '	defer func() {}()'
mutant selftest-goes-on-after-a-failure 'cmd/docker-rdma/internal/commands.(*selftest).add' ./cmd/docker-rdma/internal/commands/ 'TestSelftest' \
  '	return st.Status != "fail"' \
  '	return true'

# Several rails: NCCL's own choice honours NCCL_IB_ADDR_RANGE; a range is
# exported only when it takes the container's entry on every rail; UCX's
# own choice is checked; rdma-exec refuses a mismatch; the CLI connects the
# other networks on engines that create on one; a CDI device sets only its
# own variables.
mutant nccl-rule-ignores-range 'internal/rdmaenv.NCCLPick' ./internal/rdmaenv/ '' \
  'inRange := !a.Range.IsValid() || (cf == want && a.Range.Contains(c.GID.Unmap()))' \
  'inRange := true'
mutant nccl-range-unchecked 'internal/rdmaenv.ncclSetting' ./internal/rdmaenv/ '' \
  'if wrong := ncclWrong(ports, a); wrong == "" {' \
  'if wrong := ncclWrong(ports, a); wrong == "" || true {'
mutant ucx-choice-unchecked 'internal/rdmaenv.Vars' ./internal/rdmaenv/ '' \
  'case wrong == "":' \
  'case wrong == "" || true:'
# NCCL picks a GID on every connection: a range that holds a neighbour's
# address is never exported; UCX gets the container's own addresses as
# UCX_IB_ROCE_SUBNETS, checked, and never next to UCX_IB_GID_INDEX; UCX
# 1.21 takes a global IPv6 entry before a link-local one; -1 asks NCCL to
# find the entry itself on one rail too.
mutant nccl-range-holds-neighbours 'internal/rdmaenv.ncclSetting' ./internal/rdmaenv/ '' \
  'if why := holdsOthers(r, ports); why != "" {' \
  'if why := holdsOthers(r, ports); false && why != "" {'
mutant nccl-range-unknown-subnets-trusted 'internal/rdmaenv.holdsOthers' ./internal/rdmaenv/ 'TestVarsDifferentIndexes' \
  'if p.Subnets == nil {' \
  'if p.Subnets == nil && false {'
mutant ucx-subnets-unchecked 'internal/rdmaenv.Vars' ./internal/rdmaenv/ '' \
  'case wrongOwn == "":' \
  'case true:'
mutant ucx-subnets-next-to-index 'internal/rdmaenv.Vars' ./internal/rdmaenv/ 'TestVarsDifferentIndexes' \
  '	case same:
		plan.Vars = append(plan.Vars, Var{UCXGIDIndex, strconv.Itoa(index)})
	case ucxGiven:' \
  '	case same:
		plan.Vars = append(plan.Vars, Var{UCXGIDIndex, strconv.Itoa(index)})
	case ucxGiven && false:'
mutant ucx-link-local-first 'internal/rdmaenv.UCXPick' ./internal/rdmaenv/ 'TestUCXPickPrefersGlobalIPv6' \
  'if !usableGID(e.GID) {' \
  'if false && !usableGID(e.GID) {'
mutant nccl-minus-one-ignored 'internal/rdmaenv.Vars' ./internal/rdmaenv/ 'TestVarsNCCLFindsItselfOnOneRail' \
  'ncclSelf := findsItself(given)' \
  'ncclSelf := findsItself(nil)'
# The one reader of whole GID entries: rdma-exec's, and the daemon's and the CLI's through rdma.Sysfs.GIDs.
mutant gid-reader-keeps-empty-slots 'internal/rdmaenv.ReadTable' './internal/rdmaenv/ ./rdma/' 'TestReadTable|TestGIDs' \
  'if err != nil || g.IsUnspecified() || !g.Is6() {' \
  'if err != nil || !g.Is6() {'
# A port is taken for netdev's own from its reserved default slots only when the entry there names netdev.
mutant default-slot-ignores-ndev 'rdma.(*Sysfs).defaultSlotHolds' ./rdma/ TestMatchNdevAsTheWholeTables \
  'ok && nd == netdev {' \
  'ok || nd == netdev {'
# The drift check skips slots it judged already, but never an endpoint ready since, nor one it left for a later read.
mutant drift-skip-ignores-readiness 'driver/gid.(*Tracker).track' ./driver/gid/ TestDriftJudgedOnUnchangedSlotsWhenSomethingIsNew \
  '	t.eps[e.id] = e
	t.readyGen++' \
  '	t.eps[e.id] = e'
mutant drift-skip-forgets-deferred 'driver/gid.(*Tracker).checkDrift' ./driver/gid/ TestDriftNotJudgedOnAnOlderRead \
  'deferred = true
			continue' \
  'continue'
mutant gid-mismatch-starts-anyway 'internal/rdmaexec.Main' ./internal/rdmaexec/ '' \
  'if !cfg.AcceptMismatch {' \
  'if false {'
mutant one-network-at-create 'cmd/docker-rdma/internal/commands.cmdRun' ./cmd/docker-rdma/internal/commands/ TestRunSeveralNetworks \
  'if len(distinctNetworks(p)) > 1 && !createsOnSeveralNetworks(s) {' \
  'if false {'
mutant cdi-sets-shared-variable 'cdi.NewSpec' ./cdi/ '' \
  'env := []string{EnvDevicePrefix + key + "=" + d.HCA + ":" + strconv.Itoa(d.Port)}' \
  'env := []string{"RDMA_MACVLAN_DEVICE=" + d.HCA + ":" + strconv.Itoa(d.Port)}'

# docker rdma compose's override: only services on an rdma-macvlan network
# (or sharing one's namespace) get runtime: rdma-macvlan; the override
# doubles every $; every rail is named.
dcompose=./cmd/docker-rdma/internal/compose/
mutant compose-every-service 'cmd/docker-rdma/internal/compose.Generate' "$dcompose" '' \
  '		if len(rails) == 0 {
			continue
		}' \
  '		if len(rails) == 0 && false {
			continue
		}'
mutant compose-network-mode-ignored 'cmd/docker-rdma/internal/compose.(*generator).railsOf' "$dcompose" '' \
  'case strings.HasPrefix(mode, "service:"):' \
  'case strings.HasPrefix(mode, "service:") && false:'
mutant compose-dollar-interpolated 'cmd/docker-rdma/internal/compose.quote' "$dcompose" '' \
  'return strconv.Quote(strings.ToValidUTF8(strings.ReplaceAll(s, "$", "$$"), "\uFFFD"))' \
  'return strconv.Quote(strings.ToValidUTF8(s, "\uFFFD"))'
# What comes from a network, a container or an image is a value of the
# override, never a key: every string is quoted with its control characters
# escaped, the names in a comment are escaped, memlock is numbers.
mutant compose-string-unquoted 'cmd/docker-rdma/internal/compose.quote' ./cmd/docker-rdma/internal/compose/ TestWriteKeepsValuesInTheirPlace \
  'return strconv.Quote(strings.ToValidUTF8(strings.ReplaceAll(s, "$", "$$"), "\uFFFD"))' \
  'return "\"" + strings.ReplaceAll(s, "$", "$$") + "\""'
mutant compose-comment-raw 'cmd/docker-rdma/internal/compose.(*Override).Write' ./cmd/docker-rdma/internal/compose/ TestWriteKeepsValuesInTheirPlace \
  'rails[i] = escape.Controls(r)' \
  'rails[i] = escape.Controls("") + r'
mutant compose-memlock-unchecked 'cmd/docker-rdma/internal/compose.(*Override).Write' ./cmd/docker-rdma/internal/compose/ TestWriteKeepsValuesInTheirPlace \
  'if !ok || !isLimit(soft) || !isLimit(hard) {' \
  'if false && !ok {'
# What docker rdma prints for people (tables, text, warnings, errors, the
# dry-run's command line, JSON) holds no raw control character from a
# name or a message of the engine or the daemon.
mutant escape-keeps-c1 'cmd/docker-rdma/internal/escape.firstUnprintable' ./cmd/docker-rdma/internal/escape/ TestControls \
  'if !strconv.IsPrint(r) {' \
  'if r < 0x20 {'
mutant print-args-raw 'cmd/docker-rdma/internal/commands.printable' ./cmd/docker-rdma/internal/commands/ TestPrintersEscapeControlCharacters \
  'out[i] = escape.Controls(x)' \
  'out[i] = x'
mutant json-controls-raw 'cmd/docker-rdma/internal/commands.escapeJSON' ./cmd/docker-rdma/internal/commands/ TestPrintersEscapeControlCharacters \
  "if r == '\\n' || strconv.IsPrint(r) || r == utf8.RuneError && n == 1 {" \
  'if true || strconv.IsPrint(r) {'
mutant shell-quote-controls-raw 'cmd/docker-rdma/internal/commands.shellQuote' ./cmd/docker-rdma/internal/commands/ 'TestShellQuoteControlCharacters|TestPrintersEscapeControlCharacters' \
  'if escape.Controls(a) != a {' \
  'if false {'
# docker rdma run and compose: nothing runs on an engine without the
# rdma-macvlan runtime; a --runtime of the user's own is kept.
mutant run-without-runtime 'cmd/docker-rdma/internal/commands.checkRuntime' ./cmd/docker-rdma/internal/commands/ 'TestRunRefusesWithoutTheRuntime|TestComposeRefusesWithoutTheRuntime' \
  'if _, ok := info.Runtimes[api.RuntimeName]; ok {' \
  'if _, ok := info.Runtimes[api.RuntimeName]; ok || true {'
mutant run-user-runtime-overridden 'cmd/docker-rdma/internal/runflags.Added' './cmd/docker-rdma/internal/runflags/ ./cmd/docker-rdma/internal/commands/' 'TestAdded|TestRunDryRun|TestRunRefusesWithoutTheRuntime' \
  'if p.Runtime == "" {' \
  'if true {'
mutant compose-env-file-ignored 'cmd/docker-rdma/internal/compose.(*Args).ConfigFiles' ./cmd/docker-rdma/internal/compose/ TestConfigFilesFromEnvFile \
  'return fromFiles[k]' \
  'return fromFiles[""]'
mutant compose-first-rail-only 'cmd/docker-rdma/internal/compose.(*generator).railsOf' "$dcompose" '' \
  '			if rail != "" {
				rails = append(rails, rail)
			}' \
  '			if rail != "" && len(rails) == 0 {
				rails = append(rails, rail)
			}'
mutant compose-default-files-dropped 'cmd/docker-rdma/internal/compose.(*Args).ConfigFiles' "$dcompose" '' \
  '			if o := first(dir, overrideFiles); o != "" {' \
  '			if o := first(dir, overrideFiles); false && o != "" {'

# QoS options: each in its range; an option not given is not 0; the rails'
# values are exported only when they agree, a rail without one disagrees,
# and only the user's value for both libraries settles a conflict, which
# rdma-exec refuses; a port's CDI device carries only what its networks
# agree on, again when one goes; doctor judges the network's own class.
mutant qos-range-off-by-one 'driver.parseLevel' ./driver/ TestParseNetworkOptions \
  'if !levelRE.MatchString(v) || err != nil || n < 0 || n > maxN {' \
  'if !levelRE.MatchString(v) || err != nil || n < 0 || n > maxN+1 {'
mutant qos-absent-is-zero 'driver.(*Driver).planNetwork' ./driver/ TestStatusQoS \
  'TrafficClass: opts.TrafficClass.Ptr(),' \
  'TrafficClass: &opts.TrafficClass.N,'
mutant qos-rails-differ-exported 'internal/rdmaenv.QoSVars' './internal/rdmaenv/ ./internal/rdmaexec/' '' \
  'if same && value >= 0 {' \
  'if (same || !same) && value >= 0 {'
mutant qos-unset-rail-agrees 'internal/rdmaenv.QoSVars' './internal/rdmaenv/ ./internal/rdmaexec/' '' \
  'case p == nil && value >= 0, p != nil && *p != value:' \
  'case p != nil && *p != value:'
mutant qos-one-library-settles 'internal/rdmaenv.QoSVars' './internal/rdmaenv/ ./internal/rdmaexec/' '' \
  'if ncclGiven && ucxGiven {' \
  'if ncclGiven || ucxGiven {'
mutant qos-conflict-starts-anyway 'internal/rdmaexec.Main' ./internal/rdmaexec/ '' \
  'len(q.Conflict) > 0 {' \
  'len(q.Conflict) > 9 {'
# sysfs is read through sysattr: the open never blocks (a FIFO), nothing but
# a regular file is read, and never more than a page; the daemon and the CLI
# read it so too. rdma-exec's wait ends at its deadline and at a signal
# whatever a look does, and an HCA name that cannot be the kernel's is bad
# usage.
mutant sysfs-read-blocks-on-fifo 'internal/sysattr.open' ./internal/sysattr/ 'TestRead' \
  'syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|flags' \
  'syscall.O_RDONLY|syscall.O_CLOEXEC|flags'
mutant sysfs-read-not-regular 'internal/sysattr.Read' ./internal/sysattr/ 'TestRead' \
  'if st.Mode&syscall.S_IFMT != syscall.S_IFREG {' \
  'if false && st.Mode&syscall.S_IFMT != syscall.S_IFREG {'
mutant sysfs-read-past-a-page 'internal/sysattr.MaxSize' ./internal/sysattr/ 'TestRead' \
  'const MaxSize = 4096' \
  'const MaxSize = 1 << 20'
mutant rdma-sysfs-read-blocks 'rdma.readTrimmed' ./rdma/ 'TestSysfsRefusesWhatIsNoAttribute' \
  'return sysattr.Read(path, nil)' \
  'b, err := os.ReadFile(path); _ = sysattr.Read; return strings.TrimSpace(string(b)), err'
mutant rdma-exec-look-past-deadline 'internal/rdmaexec.Wait' ./internal/rdmaexec/ 'TestWaitDeadlineWhateverAReadDoes|TestExecSignalEndsAStuckWait' \
  'done, err := within(ctx, deadline.Add(overrun), func() { ports, missing = look(cfg) })' \
  'done, err := true, ctx.Err(); ports, missing = look(cfg)'
mutant rdma-exec-signal-waits-for-look 'internal/rdmaexec.within' ./internal/rdmaexec/ 'TestWaitDeadlineWhateverAReadDoes|TestExecSignalEndsAStuckWait' \
  'return false, ctx.Err()' \
  '<-done; return true, nil'
mutant rdma-exec-hca-unchecked 'internal/rdmaexec.parseNet' ./internal/rdmaexec/ 'TestNetRejectsBadHCA' \
  'if err := rdmaenv.CheckDeviceName(val); err != nil {' \
  'if err := error(nil); err != nil {'
mutant cdi-qos-unset-network-ignored 'driver.(*Driver).portQoS' ./driver/ TestCDISpecQoS \
  '} else if v != nil && (p == nil || *p != *v) {' \
  '} else if v != nil && p != nil && *p != *v {'
mutant cdi-qos-kept-after-delete 'driver.(*Driver).removeCDIUnlessUsed' ./driver/ TestCDISpecQoS \
  'd.rewriteCDIFor(name, except, log)' \
  '_ = except'
mutant doctor-ignores-network-class 'cmd/docker-rdma/internal/commands.(*doctor).checkFabric' ./cmd/docker-rdma/internal/commands/ TestDoctorFabric \
  'tc := r.tc' \
  'tc := -1'

# The HCA found again at start: a renamed one followed, not the recorded
# name; a device gone never replaced by whatever has the name now.
mutant hca-not-followed 'driver.(*Driver).restore' "$unit" 'TestRenamedHCA|TestGoneHCA' \
  'd.followHCAs(states, log)' \
  '_ = states'
# Found again, a network's restored endpoints are tracked and watched; a
# spec is never rewritten from a network whose device was not found; a
# watch resumed for a running container is not held by EndpointOperInfo
# (until a Join of this process starts one of its own);
# drift is not judged on a read older than the readiness.
mutant refound-endpoints-not-tracked 'driver.(*Driver).refindHCA' "$unit" 'TestHCAFoundAfterStart' \
  'd.track(&e.endpoint, time.Time{})' \
  '_ = time.Time{}'
mutant cdi-from-problem-network 'driver.(*Driver).networksOnCDI' "$unit" 'TestGoneHCA' \
  'if id != except && n.RDMA != nil && n.hcaProblem == "" && n.RDMA.cdiName() == name {' \
  'if id != except && n.RDMA != nil && n.RDMA.cdiName() == name {'
mutant strict-holds-resumed-watch 'driver.(*Driver).EndpointInfo' "$unit" 'TestStrictDoesNotHoldResumedWatches' \
  'if e.Sandbox != "" && !e.RDMAReady && e.phase != epResumed {' \
  'if e.Sandbox != "" && !e.RDMAReady {'
mutant join-keeps-resumed 'driver.(*Driver).Join' "$unit" 'TestStrictDoesNotHoldResumedWatches' \
  'e.phase = epLive' \
  '_ = epLive'
mutant drift-judged-on-older-read 'driver/gid.(*Tracker).checkDrift' ./driver/gid/ 'TestDriftNotJudgedOnAnOlderRead' \
  'if e.readyAt.After(at) {' \
  'if false && e.readyAt.After(at) {'
# A device not there at start is taken once it is (CreateEndpoint looks again).
mutant hca-never-found-again 'driver.(*Driver).refindHCA' "$unit" 'TestHCAFoundAfterStart' \
  'n.hcaProblem = ""' \
  '_ = nid'
mutant hca-identity-ignored 'driver.(*Driver).resolveHCA' "$unit" 'TestRenamedHCA|TestGoneHCA' \
  'if ids[i].Same(old.identity()) {' \
  'if cands[i].HCA == old.HCA {'
mutant gone-hca-spec-kept 'driver.(*Driver).reconcileCDI' "$unit" 'TestGoneHCA' \
  'if n.RDMA != nil && n.hcaProblem == "" {' \
  'if n.RDMA != nil {'
# What the driver knows of a network at run time only: no endpoint is
# created on a network DeleteNetwork is removing; why strict could not hold
# a start is in the status.
mutant network-removing-ignored 'driver.(*Driver).createDecide' "$unit" 'TestNetworkCallsDoNotHoldOtherEndpoints' \
  'if n.removing {' \
  'if false {'
mutant strict-note-dropped 'driver.(*Driver).strictFallsBack' "$unit" 'TestStrict' \
  'n.strictNote = why' \
  '_ = why'
# A reserved endpoint (its CreateEndpoint under way) holds its address and
# passthru's one container, and is not yet known to anything else.
mutant live-yields-reserved 'driver.(*Driver).live' "$unit" 'TestReservedEndpointIsNotYetKnown' \
  'if e.phase != epReserved && !yield(e) {' \
  'if !yield(e) {'
mutant lookup-finds-reserved 'driver.(*Driver).endpoint' "$unit" 'TestReservedEndpointIsNotYetKnown' \
  'if !ok || e.phase == epReserved {' \
  'if !ok {'
mutant same-address-ignores-reserved 'driver.(*Driver).sameAddressOnPort' "$unit" 'TestReservedEndpointIsNotYetKnown' \
  'if o.ID == req.EndpointID || !ok ||' \
  'if o.phase == epReserved || o.ID == req.EndpointID || !ok ||'
mutant passthru-ignores-reserved 'driver.(*Driver).createDecide' "$unit" 'TestReservedEndpointIsNotYetKnown' \
  'if e.NetworkID == n.ID {' \
  'if e.NetworkID == n.ID && e.phase != epReserved {'
# One address on one port: refused whatever the network.
mutant same-address-other-network 'driver.(*Driver).sameAddressOnPort' "$unit" 'TestSameAddress' \
  'if !mine[i].IsValid() || mine[i] != addrOf(theirs) {' \
  'if !mine[i].IsValid() || mine[i] != addrOf(theirs) || o.NetworkID != n.ID {'
# Drift: noticed on a table read, reported once.
mutant drift-not-noticed 'driver/gid.moved' "$gids" 'Drift' \
  'if !holds(table, f) {
			return true' \
  'if false && !holds(table, f) {
			return true'
mutant drift-any-entry-in-the-slot 'driver/gid.holds' "$gids" 'Drift' \
  'table.Slots[f.Index] == f.GID' \
  'table.Slots[f.Index] != ""'
mutant drift-reported-every-read 'driver/gid.(*Tracker).checkDrift' "$gids" 'Drift' \
  'e.port != p || !e.ready || e.drifted ||' \
  'e.port != p || !e.ready ||'
# Strict whatever the join order: the gateway's call holds the container's
# other strict endpoints, EndpointOperInfo holds a strict endpoint joined
# after the gateway.
mutant strict-gateway-alone 'driver.(*Driver).ProgramExternalConnectivity' "$unit" 'TestStrict' \
  'held := d.strictOf(&e.endpoint, true)' \
  'held := d.strictOf(&e.endpoint, false)'
mutant strict-info-holds-nothing 'driver.(*Driver).EndpointInfo' "$unit" 'TestStrict' \
  'd.holdInfo(h)' \
  '_ = h'

# The runtime (internal/ociruntime): a container on no rdma-macvlan network
# reaches runc with config.json untouched; one on such a network gets its
# networks' ports only, and one on the engine's own networks costs no request;
# its own memlock stays; a refusal leaves the spec and
# reaches containerd through runc's JSON log; a view goes only with its
# container.
rt=./internal/ociruntime/
mutant runtime-rewrites-untouched 'internal/ociruntime.prepare' "$rt" 'TestContainerOnNoRDMANetwork|TestNoneLeavesTheSpecAlone' \
  'if len(found.Rails) == 0 && choice.Devices == nil {
		return nil
	}' \
  'if len(found.Rails) == 0 && choice.Devices == nil {
		out, _ := json.Marshal(&spec)
		return os.WriteFile(path, out, 0o644)
	}'
mutant runtime-none-ignored 'internal/ociruntime.ParseChoice' "$rt" 'TestNoneLeavesTheSpecAlone' \
  'c.None = true
		return c, nil' \
  'return c, nil'
mutant runtime-every-served-port 'internal/ociruntime.Decide' "$rt" 'TestRDMAContainerGetsItsHCA' \
  'for _, r := range f.Rails {
			add(r.CDIDevice, r.HCA)
		}' \
  'for port, hca := range f.Ports {
			add(port, hca)
		}'
mutant runtime-replaces-own-memlock 'internal/ociruntime.Apply' "$rt" 'TestOwnChoicesKept' \
  'if !memlock {' \
  'if true || !memlock {'
mutant runtime-api-for-recorded-network 'internal/ociruntime.(*Finder).Find' "$rt" 'TestContainerOnNoRDMANetwork|TestEngineOrPluginTrouble' \
  'if nid == "" {
			nw, ok, err := f.Engine.Network(ctx, name)' \
  'if true {
			nw, ok, err := f.Engine.Network(ctx, name)'
mutant runtime-error-not-in-log 'internal/ociruntime.(*Invocation).fail' "$rt" 'TestDevicesList' \
  'if inv.LogFormat == "json" {' \
  'if inv.LogFormat == "text" {'
mutant runtime-delete-removes-running-view 'internal/ociruntime.Main' "$rt" 'TestSysfsViewAndItsRemoval' \
  'if status == 0 && !exists(filepath.Join(inv.Root, id)) {' \
  'if !exists(filepath.Join(inv.Root, id)) {'
mutant runtime-view-lists-every-hca 'internal/ociruntime.MakeView' "$rt" 'TestSysfsViewAndItsRemoval' \
  'if err != nil || !slices.Contains(hcas, strings.TrimSpace(dev)) {' \
  'if err != nil || slices.Contains([]string{""}, dev) {'
mutant runtime-asks-for-builtin-networks 'internal/ociruntime.(*Finder).Find' "$rt" 'TestContainerOnNoRDMANetwork' \
  'if len(nets) == 0 && !needPorts {' \
  'if len(nets) == 0 && needPorts {'
mutant runtime-exec-untouched 'internal/ociruntime.editExec' "$rt" 'TestExecGetsTheCreatesCapAndMemlock' \
  'x.Apply(&p)' \
  '_ = x'
mutant runtime-exec-no-memlock 'internal/ociruntime.ExecEdits.Apply' "$rt" 'TestExecGetsTheCreatesCapAndMemlock' \
  'if x.Memlock != nil && !hasRlimit(p.Rlimits, "RLIMIT_MEMLOCK") {' \
  'if false {'
mutant runtime-bad-variable-stops-all 'internal/ociruntime.prepare' "$rt" 'TestBadVariableOnlyForRDMAContainers' \
  'choice, choiceErr := ParseChoice(spec.Process.Env)' \
  'choice, choiceErr := ParseChoice(spec.Process.Env)
	if choiceErr != nil {
		return choiceErr
	}'
mutant runtime-dead-plugin-ignored 'internal/ociruntime.(*Finder).Find' "$rt" 'TestEngineOrPluginTrouble' \
  'if len(dead) > 0 && len(unserved) > 0 {' \
  'if false && len(dead) > 0 && len(unserved) > 0 {'

if [ "${1:-}" = --list ]; then
  for i in "${!names[@]}"; do
    printf '%-32s %-38s %s %s\n' "${names[$i]}" "${wheres[$i]}" "${pkgs[$i]}" "${runs[$i]:+-run ${runs[$i]}}"
  done
  exit 0
fi
if [ "${1:-}" = --check ]; then
  args=()
  for i in "${!names[@]}"; do args+=("${names[$i]}" "${wheres[$i]}" "${olds[$i]}" "${news[$i]}"); done
  go run ./tools/mutant check -tree . "${args[@]}"
  echo "mutate: all ${#names[@]} mutants apply"
  exit 0
fi

selected=()
if [ $# -eq 0 ]; then
  selected=("${!names[@]}")
else
  for want in "$@"; do
    found=
    for i in "${!names[@]}"; do
      if [ "${names[$i]}" = "$want" ]; then selected+=("$i"); found=1; fi
    done
    if [ -z "$found" ]; then
      echo "mutate: no mutant named $want (see: $0 --list)" >&2
      exit 2
    fi
  done
fi

root=1
[ "$(id -u)" = 0 ] || root=

# Workers: MUTATE_JOBS (default 2) copies of the tree, each in a directory
# of its own, test mutants at the same time; 1 tests them one by one as
# before. Each worker takes the next mutant no worker has taken yet (a
# shared queue in the order above: a claim is a mkdir, which only one can
# win), applies it to its own copy, tests it, puts the file back from the
# copy it saved before the change, and writes the mutant's line to a file
# of its own; a line per mutant tells the progress as each one ends, and the
# table comes at the end in the order above. They share Go's build cache.
# Privileged mutants run on any worker, two at a time: the tests they run
# (TestPrivilegedEnslavedParent, TestPrivilegedCrashPoints) make their links
# only in namespaces of their own without a name (netnstest.Make) and keep every
# file, socket and daemon in their t.TempDir(), so two cannot meet.
workers=${MUTATE_JOBS:-2}
if ! [[ $workers =~ ^[1-9][0-9]*$ ]]; then
  echo "mutate: MUTATE_JOBS=$workers: want a number of workers, 1 or more" >&2
  exit 2
fi
if [ "$workers" -gt "${#selected[@]}" ]; then workers=${#selected[@]}; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rdma-macvlan-mutate.XXXXXX")
pids=() # the running workers, each the leader of its process group
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || true; done
  wait || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/w0/tree" "$work/claim" "$work/res" "$work/bad" "$work/log"
# The files git knows of (tracked, and new ones not ignored), as they are in
# the working tree now; one copy per worker, each at its own path.
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$work/w0/tree"
# The tool that applies a mutant, built once from the tree as it is.
(cd "$work/w0/tree" && go build -o "$work/mutant" ./tools/mutant)
for ((k = 1; k < workers; k++)); do
  mkdir "$work/w$k"
  cp -a "$work/w0/tree" "$work/w$k/tree"
done

# runtests TREE LOG PACKAGES RUN TIMEOUT: go test in a copy; 0 when every
# test passed. -failfast: a package's tests stop at its first failure, which
# is all a mutant needs (a mutant that hangs a test otherwise waits out every
# bound). -vet=off: the lint stage vets the tree, and a mutant counts as
# caught by a failing test only. A mutant's tests get mutant_timeout: the
# slowest caught mutant takes about 15 s here, and one that deadlocks is caught by go test's
# timeout, which would otherwise hold its worker for the baseline's 10
# minutes.
mutant_timeout=${MUTATE_TIMEOUT:-2m}
runtests() {
  local tree=$1 log=$2 p=$3 run=$4 timeout=$5 args=()
  [ -n "$run" ] && args=(-run "$run")
  # shellcheck disable=SC2086 # PACKAGES is a list
  (cd "$tree" && go test -count=1 -failfast -vet=off -v -timeout "$timeout" "${args[@]}" $p) >"$log" 2>&1
}

# Failing tests of a log, top level only, or what kept the package from
# building.
failures() {
  grep -oE '^--- FAIL: [^ ]+' "$1" | sed 's/^--- FAIL: //' | sort -u | paste -sd' ' - || true
}

# claim WHAT: true for the one worker that takes WHAT first.
claim() { mkdir "$work/claim/$1" 2>/dev/null; }

# spawn baseline|mutate: runs baseline K or mutate K for each worker K at
# once, each in a process group of its own (set -m) that the trap ends with
# its go test, and waits for them all. What a worker found is in the files
# it wrote.
spawn() {
  local k
  set -m
  for ((k = 0; k < workers; k++)); do
    case $1 in
      baseline) baseline "$k" & ;;
      mutate) mutate "$k" & ;;
    esac
    pids+=("$!")
  done
  set +m
  for k in "${pids[@]}"; do wait "$k" || true; done
  pids=()
}

row() { printf '%-32s %-8s %5s  %s\n' "$@"; }

status=0
start=$SECONDS

# The unmutated copy must pass the tests the mutants use: per package, one
# go test of the tests of every mutant that names it (all of them when one
# mutant names no test), so that each test binary is built once here.
declare -A baseruns=()
for i in "${selected[@]}"; do
  if [[ ${runs[$i]} == *TestPrivileged* && -z $root ]]; then continue; fi
  for p in ${pkgs[$i]}; do
    if [ -z "${runs[$i]}" ] || [ "${baseruns[$p]-}" = - ]; then
      baseruns[$p]=- # every test of the package
    elif [[ "|${baseruns[$p]-}|" != *"|(${runs[$i]})|"* ]]; then
      baseruns[$p]+="${baseruns[$p]:+|}(${runs[$i]})"
    fi
  done
done
groups=("${!baseruns[@]}")
baseline() {
  local tree=$work/w$1/tree g run p t0 log what
  for g in "${!groups[@]}"; do
    [ ! -e "$work/baseline.failed" ] || return 0
    claim "base.$g" || continue
    p=${groups[$g]}
    run=${baseruns[$p]#-}
    what="go test $p${run:+ -run $run}"
    echo "mutate: baseline: $what"
    t0=$SECONDS
    log=$work/log/baseline.$g
    if runtests "$tree" "$log" "$p" "$run" 10m; then
      echo "mutate: baseline passed in $((SECONDS - t0)) s: $what"
      : >"$work/res/baseline.$g"
    else
      : >"$work/baseline.failed"
      printf '%s\n' "mutate: the unmutated tree fails its tests ($what); fix that first:" \
        "$(grep -E '^(--- FAIL|FAIL|ok|panic)' "$log" | head -40)" >&2
    fi
  done
}
if [ "${#groups[@]}" -gt 0 ]; then spawn baseline; fi
for g in "${!groups[@]}"; do
  if [ ! -e "$work/res/baseline.$g" ]; then
    if [ ! -e "$work/baseline.failed" ]; then
      echo "mutate: a baseline was not run to its end (its worker stopped: see above)" >&2
    fi
    exit 1
  fi
done
rm -f "$work"/res/baseline.*

total=${#selected[@]}
# mutate K: worker K's share of the mutants. The line of the mutant at
# position POS of the selection goes to res/POS, a mark to bad/POS when it
# fails the check.
mutate() {
  local k=$1 tree=$work/w$1/tree saved=$work/w$1/orig
  local pos i name file log t0 verdict secs text extra caught n
  for pos in "${!selected[@]}"; do
    claim "mutant.$pos" || continue
    i=${selected[$pos]}
    name=${names[$i]}
    t0=$SECONDS verdict=STALE secs=- extra=
    if [[ ${runs[$i]} == *TestPrivileged* && -z $root ]]; then
      verdict=NOT-RUN text="needs root (privileged tests): run as root"
    else
      if ! file=$("$work/mutant" apply -tree "$tree" -save "$saved" "${wheres[$i]}" "${olds[$i]}" "${news[$i]}" 2>&1); then
        text=${file#mutant: }
      else
        log=$work/log/$pos
        if runtests "$tree" "$log" "${pkgs[$i]}" "${runs[$i]}" "$mutant_timeout"; then
          verdict=SURVIVED text="no test failed: add one that does"
        elif grep -qE '\[(build|setup) failed\]|^# ' "$log"; then
          verdict=BROKEN text="does not compile:"
          extra=$(grep -vE '^(=== |--- |PASS|ok)' "$log" | head -10 | sed 's/^/    /') || true
        else
          verdict=caught caught=$(failures "$log")
          text=${caught:-(a package failed without a failing test: see below)}
          if [ -z "$caught" ]; then
            extra=$(grep -E '^(FAIL|panic)' "$log" | head -5 | sed 's/^/    /') || true
          fi
        fi
        secs=$((SECONDS - t0))
        # Put the file back before this worker's next mutant.
        cp "$saved" "$tree/$file"
      fi
    fi
    if [ "$verdict" != caught ]; then : >"$work/bad/$pos"; fi
    {
      row "$name" "$verdict" "$secs" "$text"
      if [ -n "$extra" ]; then printf '%s\n' "$extra"; fi
    } >"$work/res/.$pos"
    mv "$work/res/.$pos" "$work/res/$pos"
    n=$(find "$work/res" -maxdepth 1 -type f ! -name '.*' | wc -l)
    if [ "$secs" = - ]; then secs=; else secs=" in $secs s"; fi
    echo "mutate: $n/$total done: $name $verdict$secs"
  done
}
spawn mutate

row MUTANT RESULT SECS 'FAILING TESTS'
for pos in "${!selected[@]}"; do
  if [ -f "$work/res/$pos" ]; then
    cat "$work/res/$pos"
  else
    row "${names[${selected[$pos]}]}" NO-RESULT - "its worker stopped before it ended (see above)"
    status=1
  fi
  if [ -e "$work/bad/$pos" ]; then status=1; fi
done
echo "mutate: $total mutants in $((SECONDS - start)) s ($workers at a time)"
if [ "$status" != 0 ]; then
  echo "mutate: FAILED: a mutant survived, is stale, broken or was not run (above)" >&2
fi
exit "$status"
