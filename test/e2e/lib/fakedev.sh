# shellcheck shell=bash
# lib/fakedev.sh: the /dev/infiniband nodes of a fake sysfs tree (test/fakesysfs), for
# scripts that run `docker rdma run` on a host without RDMA hardware (sourced, never run).
# The sourcing script gives say (progress) and calls fake_dev_remove in its clean-up.

made_dev=""   # /dev/infiniband when fake_dev_nodes made it
made_nodes=() # uverbs nodes fake_dev_uverbs added to a /dev/infiniband it did not make

# fake_dev_remove removes what fake_dev_nodes and fake_dev_uverbs made, and only that.
fake_dev_remove() {
	local p
	for p in "${made_nodes[@]}"; do rm -f "$p"; done
	made_nodes=()
	if [[ -n $made_dev ]]; then
		rm -rf "$made_dev"
		made_dev=""
	fi
}

# fake_dev_nodes ROOT makes /dev/infiniband with the nodes of the fake tree under ROOT (uverbs0
# 231:192 and rdma_cm with the tree's numbers) and decoys that must not reach containers
# (uverbs1, umad0, issm0) when the host has none, and sets made_dev to it: the caller removes it
# when done. A host that has /dev/infiniband must have the fake tree's uverbs0 and rdma_cm (they
# are used as they are, and left). Fails when neither holds; called in a condition (errexit is
# off), so every step says when it fails.
fake_dev_nodes() {
	local cm
	cm=$(cat "$1/sys/class/misc/rdma_cm/dev") || return 1
	if mkdir -m 0755 /dev/infiniband 2>/dev/null; then
		made_dev=/dev/infiniband
		mknod -m 0666 /dev/infiniband/uverbs0 c 231 192 &&
			mknod -m 0666 /dev/infiniband/uverbs1 c 231 193 &&
			mknod -m 0666 /dev/infiniband/rdma_cm c "${cm%%:*}" "${cm##*:}" &&
			mknod -m 0600 /dev/infiniband/umad0 c 231 0 &&
			mknod -m 0600 /dev/infiniband/issm0 c 231 64
		return
	fi
	say "/dev/infiniband exists: using the host's nodes, which must match the fake tree"
	[[ $(stat -c '%t:%T' /dev/infiniband/uverbs0 2>/dev/null) == e7:c0 ]] || return 1
	[[ $(stat -c '%t:%T' /dev/infiniband/rdma_cm 2>/dev/null) == "$(printf '%x:%x' "${cm%%:*}" "${cm##*:}")" ]] || return 1
}

# fake_dev_uverbs N: after fake_dev_nodes, uverbs0 .. uverbs(N-1) exist with 231:(192+k) (the
# numbers test/fakesysfs gives -uverbs k); the ones this call adds are listed in made_nodes, for the
# caller to remove when /dev/infiniband is not its own. Fails when one exists with other numbers.
fake_dev_uverbs() {
	local k p
	for ((k = 0; k < $1; k++)); do
		p=/dev/infiniband/uverbs$k
		if [[ ! -e $p ]]; then
			mknod -m 0666 "$p" c 231 $((192 + k)) || return 1
			made_nodes+=("$p")
		fi
		[[ $(stat -c '%t:%T' "$p") == "e7:$(printf '%x' $((192 + k)))" ]] || return 1
	done
}
