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
	// created are the fixed paths that did not exist before and were made as mount points.
	created []string
}

// fixedPaths are the kubelet's, containerd's and the CNI plugins' paths that cannot be moved by configuration;
// each is bind-mounted from the harness's directory, in the private mount namespace only.
var fixedPaths = []string{"/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/lib/cni", "/run/containerd", "/run/netns"}

// setupNetwork brings up loopback and the node's interface: one end of a veth pair whose other end is in the same
// namespace (this kernel has no dummy interfaces), with the node's address and the default route. The namespace
// has no link out: nothing can leave it. It lets the node forward between pods.
func setupNetwork() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "realnode0", "type", "veth", "peer", "name", "realnode1"},
		{"addr", "add", NodeIP + "/24", "dev", "realnode0"},
		{"link", "set", "realnode1", "up"},
		{"link", "set", "realnode0", "up"},
		{"route", "add", "default", "dev", "realnode0"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
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
func (r *realNode) teardown() error {
	errs := []error{killCgroupProcs(), killNamespaceProcs()}
	errs = append(errs, r.unmountAll(), removeKubepodsCgroups())
	for i := len(r.created) - 1; i >= 0; i-- {
		errs = append(errs, os.Remove(r.created[i]))
	}
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
