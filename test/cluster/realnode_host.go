package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// realNode is what the real node set up in its namespace and must take down again.
type realNode struct {
	dir           string
	images        []string
	dieWithParent bool
	pki           *pki
	// lock is the machine's one real node's (see lock.go), released after teardown.
	lock *NodeLock
	// created are the fixed paths that did not exist before and were made as mount points.
	created []string
	// resolvConf is the file the node's resolv.conf covers (/etc/resolv.conf, symbolic links resolved).
	resolvConf string
}

// NodeInterface is the node's end of its veth pair, the way out of the namespace if it had one; NodeInterfacePeer
// is the other end, in the same namespace. Nothing the node sends should ever go through them.
const (
	NodeInterface     = "realnode0"
	NodeInterfacePeer = "realnode1"
)

// nodeResolvConf is the resolver configuration of everything in the node's namespace: only loopback, where nothing
// answers, so a name lookup fails at once and no query leaves (the machine's resolver is an address outside).
const nodeResolvConf = `# The real node's (test/cluster): no resolver outside its namespace.
nameserver 127.0.0.1
`

// fixedPaths are the kubelet's, containerd's and the CNI plugins' paths that cannot be moved by configuration;
// each is bind-mounted from the harness's directory, in the private mount namespace only.
var fixedPaths = []string{"/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/lib/cni", "/run/containerd", "/run/netns"}

// setupNetwork brings up loopback and the node's interface: one end of a veth pair whose other end is in the same
// namespace (this kernel has no dummy interfaces), with the node's address and a route for the Service range (a
// ClusterIP needs a route before kube-proxy's rules rewrite it). The namespace has no link out, and no default
// route: an address outside the node's, the pods' and the Services' ranges is unreachable, so the node cannot even
// try one (a connect fails at once, no packet is sent). It lets the node forward between pods. IPv6 is off on the
// pair (no router solicitations, which the kernel repeats forever): what crosses it is only the node trying a
// ClusterIP that no rule rewrote or an unused address of its own link (OutboundPackets counts it).
func setupNetwork() error {
	run := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := errors.Join(run("link", "set", "lo", "up"),
		run("link", "add", NodeInterface, "type", "veth", "peer", "name", NodeInterfacePeer)); err != nil {
		return err
	}
	for _, dev := range []string{NodeInterface, NodeInterfacePeer} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6", []byte("1"), 0o644); err != nil &&
			!errors.Is(err, os.ErrNotExist) { // a kernel without IPv6 has nothing to turn off
			return err
		}
	}
	for _, args := range [][]string{
		{"addr", "add", NodeIP + "/24", "dev", NodeInterface},
		{"link", "set", NodeInterfacePeer, "up"},
		{"link", "set", NodeInterface, "up"},
		{"route", "add", ServiceCIDR, "dev", NodeInterface},
	} {
		if err := run(args...); err != nil {
			return err
		}
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}

// OutboundPackets is how many packets this network namespace has sent through the node's veth pair (its
// transmit counters, from /proc/self/net/dev: /sys/class/net shows the namespace that mounted /sys). Called inside
// the node's namespace.
func OutboundPackets() (uint64, error) {
	b, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return 0, err
	}
	var sum uint64
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, counters, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name != NodeInterface && name != NodeInterfacePeer {
			continue
		}
		// receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes packets ...
		f := strings.Fields(counters)
		if len(f) < 10 {
			return 0, fmt.Errorf("/proc/self/net/dev: %q", line)
		}
		n, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return 0, err
		}
		sum += n
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("%s and %s are not both in this network namespace", NodeInterface, NodeInterfacePeer)
	}
	return sum, nil
}

// mount makes the node's mounts, in its private mount namespace: the fixed paths and its resolv.conf.
func (r *realNode) mount() error {
	// Nothing mounted here may reach the machine's namespace, even if this one was made with shared propagation.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the node's mounts private: %w", err)
	}
	return errors.Join(r.bindFixedPaths(), r.coverResolvConf())
}

// coverResolvConf bind-mounts the node's resolv.conf (nodeResolvConf) over /etc/resolv.conf: containerd, the
// kubelet (its resolvConf), the control plane and the tests read it; the pods get its nameserver.
func (r *realNode) coverResolvConf() error {
	src := filepath.Join(r.dir, "resolv.conf")
	if err := os.WriteFile(src, []byte(nodeResolvConf), 0o644); err != nil {
		return err
	}
	target, err := filepath.EvalSymlinks("/etc/resolv.conf")
	if err != nil {
		return fmt.Errorf("covering the machine's resolver configuration: %w", err)
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s onto %s: %w", src, target, err)
	}
	r.resolvConf = target
	return nil
}

// bindFixedPaths bind-mounts dir/root/PATH onto each fixed path, making missing mount points (removed again by
// teardown).
func (r *realNode) bindFixedPaths() error {
	for _, p := range fixedPaths {
		src := filepath.Join(r.dir, "root", p)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			r.created = append(r.created, p)
		}
		if err := syscall.Mount(src, p, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s onto %s: %w", src, p, err)
		}
	}
	return nil
}

// teardown leaves nothing behind: it kills the containers' processes (by PID, from the kubepods cgroups) and
// containerd's shims (every other process of this mount namespace), unmounts what the node mounted, removes the
// kubepods cgroups and the mount points it made. The components themselves are already stopped.
// The machine's one real node's lock is held until then (see lock.go), so the kubepods cgroups are this node's.
func (r *realNode) teardown() error {
	errs := []error{killCgroupProcs(), killNamespaceProcs()}
	errs = append(errs, r.unmountAll(), removeKubepodsCgroups())
	for i := len(r.created) - 1; i >= 0; i-- {
		errs = append(errs, os.Remove(r.created[i]))
	}
	errs = append(errs, r.lock.Release())
	return errors.Join(errs...)
}

// kubepodsDirs are the kubepods cgroups of every cgroup v1 hierarchy (and v2's, when mounted) that exist.
func kubepodsDirs() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		dirs = append(dirs, "/sys/fs/cgroup/kubepods")
	}
	return dirs
}

// killCgroupProcs SIGKILLs every process in a kubepods cgroup until none is left (10 s at most).
func killCgroupProcs() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := map[int]bool{}
		for _, d := range kubepodsDirs() {
			_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
				if err == nil && e.Name() == "cgroup.procs" {
					for _, pid := range readPIDs(path) {
						pids[pid] = true
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container processes still running after 10 s: %v", pids)
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killNamespaceProcs SIGKILLs every other process of this mount namespace (containerd's shims, which daemonize
// away from containerd) until none is left (10 s at most).
func killNamespaceProcs() error {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	return killProcsIn(self)
}

// killProcsIn SIGKILLs every process but this one whose mount namespace is ns, until none is left (10 s at most).
// It refuses the machine's own mount namespace.
func killProcsIn(ns string) error {
	init, err := machineNamespace("mnt")
	if err != nil {
		return fmt.Errorf("refusing to kill the processes of mount namespace %s: %w", ns, err)
	}
	if init == ns {
		return fmt.Errorf("refusing to kill the processes of mount namespace %s: it is the machine's", ns)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			if mnt, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && mnt == ns {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the node's namespace still running after 10 s: %v", left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unmountAll unmounts, deepest first, every mount under the harness's directory or a fixed path (overlay
// snapshots, pod volumes, network namespaces, the bind mounts themselves).
func (r *realNode) unmountAll() error {
	roots := append([]string{r.dir}, fixedPaths...)
	if r.resolvConf != "" {
		roots = append(roots, r.resolvConf)
	}
	var targets []string
	for _, m := range mountPoints() {
		for _, root := range roots {
			if m == root || strings.HasPrefix(m, root+"/") {
				targets = append(targets, m)
				break
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(targets)))
	var errs []error
	for _, t := range targets {
		if err := syscall.Unmount(t, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// mountPoints lists this mount namespace's mount points (field 5 of /proc/self/mountinfo).
func mountPoints() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 {
			points = append(points, unescapeMount(fields[4]))
		}
	}
	return points
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// removeKubepodsCgroups removes the kubepods cgroups, children first.
func removeKubepodsCgroups() error {
	var errs []error
	for _, d := range kubepodsDirs() {
		var dirs []string
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// readPIDs reads a cgroup.procs file.
func readPIDs(file string) []int {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
