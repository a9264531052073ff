#!/usr/bin/env python3
"""Small queries for the engine tests in the Soft-RoCE VM (vm-docker.sh).

Runs inside the VM, where python3 comes with python3-pyverbs. Every answer
is one value or one line per item on stdout; exit 1 when it is not there.

  rmvq.py gids HCA PORT            one line per used GID slot: INDEX TYPE GID NDEV
                                   (GID compressed, IPv4-mapped as ::ffff:a.b.c.d)
  rmvq.py index HCA PORT ADDR      the RoCE v2 slot of ADDR (an IPv4 or IPv6 address)
  rmvq.py devinfo-index FILE ADDR  the RoCE v2 slot of ADDR in `ibv_devinfo -v` output
  rmvq.py inspect-index FILE       gid_index of the one endpoint in `docker rdma inspect --format json`
  rmvq.py status SOCKET            GET /v1/status of a daemon, as JSON
  rmvq.py status-gids SOCKET ADDR  INDEX TYPE GID per GID of the endpoint whose ipv4 or ipv6 is ADDR
  rmvq.py status-ep SOCKET ADDR    rdma_ready=BOOL reason=TEXT of that endpoint
  rmvq.py status-net SOCKET NAME?  used=N free=N size=N of the first network (all networks' lines)
  rmvq.py status-parent SOCKET PARENT hca|problems|vlan
                                   of the networks on PARENT: HCA/PORT; each problem;
                                   the VLAN stack and chain (STACK CHAIN), a line each
  rmvq.py strict-note SOCKET       gid_check_note of the gid_check=strict network ("" when strict holds)
  rmvq.py linklocal MAC            the EUI-64 link-local address of MAC
  rmvq.py regmr HCA BYTES          register BYTES of memory on HCA; exit 12 on ENOMEM
"""
import ipaddress
import json
import os
import socket
import sys


def gid_text(raw):
    a = ipaddress.IPv6Address(bytes.fromhex(raw.strip().replace(":", "")))
    if a.ipv4_mapped is not None:
        return "::ffff:" + str(a.ipv4_mapped)
    return str(a)


def used_gids(hca, port):
    base = "/sys/class/infiniband/%s/ports/%s" % (hca, port)
    out = []
    for name in os.listdir(base + "/gids"):
        try:
            with open("%s/gids/%s" % (base, name)) as f:
                raw = f.read()
        except OSError:
            continue
        if int(raw.strip().replace(":", ""), 16) == 0:
            continue
        try:
            with open("%s/gid_attrs/types/%s" % (base, name)) as f:
                typ = f.read().strip()
        except OSError:
            typ = "?"
        try:
            with open("%s/gid_attrs/ndevs/%s" % (base, name)) as f:
                ndev = f.read().strip()
        except OSError:
            ndev = "-"
        out.append((int(name), typ, gid_text(raw), ndev))
    return sorted(out)


def norm(addr):
    a = ipaddress.ip_address(addr.split("/")[0])
    if a.version == 4:
        return "::ffff:" + str(a)
    if a.ipv4_mapped is not None:
        return "::ffff:" + str(a.ipv4_mapped)
    return str(a)


def status(sock):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sock)
    s.sendall(b"GET /v1/status HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    head, _, body = data.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        sys.exit("status: %s" % head.split(b"\r\n")[0].decode())
    return json.loads(body)


def endpoint(st, addr):
    want = norm(addr)
    for n in st.get("networks") or []:
        for e in n.get("endpoints") or []:
            for k in ("ipv4", "ipv6"):
                if e.get(k) and norm(e[k]) == want:
                    return e
    return None


def inspect_endpoints(path):
    # the endpoints of docker rdma inspect --format json's document
    with open(path) as f:
        doc = json.load(f)
    for d in doc if isinstance(doc, list) else [doc]:
        for c in d.get("containers") or [d]:
            for n in c.get("networks") or []:
                yield from n.get("endpoints") or []


def drift(moves, addr):
    want = norm(addr)
    for m in moves or []:
        if m.get("type") == "RoCE v2" and norm(gid_addr(m["gid"])) == want:
            return "%d->%d" % (m["given_index"], m["index"])
    return "none"


def gid_addr(g):
    # a GID as /v1/status writes it (eight groups of four hex digits) as an address
    return str(ipaddress.IPv6Address(g)) if ":" in g else g


def main(a):
    cmd = a[0] if a else ""
    if cmd == "gids":
        for i, t, g, d in used_gids(a[1], a[2]):
            print(i, t.replace(" ", "_"), g, d)
    elif cmd == "index":
        want = norm(a[3])
        for i, t, g, _ in used_gids(a[1], a[2]):
            if g == want and t == "RoCE v2":
                print(i)
                return 0
        return 1
    elif cmd == "devinfo-index":
        want = norm(a[2])
        with open(a[1]) as f:
            for line in f:
                line = line.strip()
                # GID[  2]:		::ffff:10.30.0.11, RoCE v2
                if not line.startswith("GID["):
                    continue
                idx, _, rest = line[4:].partition("]:")
                gid, _, typ = rest.strip().partition(",")
                if typ.strip() == "RoCE v2" and norm(gid.strip()) == want:
                    print(int(idx))
                    return 0
        return 1
    elif cmd == "inspect-index":
        for e in inspect_endpoints(a[1]):
            if e.get("gid_index") is not None:
                print(e["gid_index"])
                return 0
        return 1
    elif cmd == "status":
        print(json.dumps(status(a[1]), indent=1))
    elif cmd == "status-gids":
        e = endpoint(status(a[1]), a[2])
        if e is None:
            return 1
        for g in e.get("gids") or []:
            print(g["index"], g["type"].replace(" ", "_"), norm(g["gid"]))
    elif cmd == "status-ep":
        e = endpoint(status(a[1]), a[2])
        if e is None:
            return 1
        print("rdma_ready=%s reason=%s" % (str(e.get("rdma_ready")).lower(), e.get("rdma_reason", "")))
    elif cmd == "status-drift":
        # the endpoint's IPv4 RoCE v2 move as GIVEN->NOW, or "none"
        e = endpoint(status(a[1]), a[2])
        if e is None:
            return 1
        print(drift(e.get("gid_drift"), a[2]))
    elif cmd == "inspect-drift":
        for e in inspect_endpoints(a[1]):
            if e.get("ipv4"):
                print(drift(e.get("gid_drift"), e["ipv4"]))
                return 0
        return 1
    elif cmd == "status-net":
        for n in status(a[1]).get("networks") or []:
            t = n.get("gid_table") or {}
            print("used=%s free=%s size=%s endpoints=%d" % (t.get("used"), t.get("free"), t.get("size"), len(n.get("endpoints") or [])))
    elif cmd == "status-parent":
        for n in status(a[1]).get("networks") or []:
            if n.get("parent") != a[2]:
                continue
            if a[3] == "hca":
                print("%s/%s" % (n.get("hca"), n.get("port")))
            elif a[3] == "problems":
                for p in n.get("problems") or []:
                    print(p)
            elif a[3] == "vlan":
                v = n.get("vlan") or {}
                print("%s %s" % (v.get("stack"), v.get("chain")))
            else:
                sys.exit("status-parent: unknown field %r (want hca, problems or vlan)" % a[3])
    elif cmd == "strict-note":
        for n in status(a[1]).get("networks") or []:
            if n.get("gid_check") == "strict":
                print(n.get("gid_check_note", ""))
                return 0
        return 1
    elif cmd == "linklocal":
        b = bytearray(int(x, 16) for x in a[1].split(":"))
        b[0] ^= 2
        eui = bytes(b[:3]) + b"\xff\xfe" + bytes(b[3:])
        print(ipaddress.IPv6Address(b"\xfe\x80" + b"\x00" * 6 + eui))
    elif cmd == "regmr":
        from pyverbs.device import Context
        from pyverbs.pd import PD
        from pyverbs.mr import MR
        from pyverbs.pyverbs_error import PyverbsRDMAError
        import pyverbs.enums as e
        size = int(a[2])
        ctx = Context(name=a[1])
        pd = PD(ctx)
        try:
            mr = MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE)
        except PyverbsRDMAError as ex:
            print("ibv_reg_mr of %d bytes failed: %s" % (size, ex))
            return 12 if ex.error_code == 12 else 1
        print("registered %d bytes (lkey %d)" % (size, mr.lkey))
        mr.close()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
