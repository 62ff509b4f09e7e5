package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BeforeV2 is the last commit before API v2, the operator the upgrade test starts from; BeforeV2Image is its image,
// built by test/images/build.sh from that commit's tree.
const (
	BeforeV2      = "0e58b1c93562e0042664b93e630c7ab1b0a6e29b"
	BeforeV2Image = "webapp-operator:before-v2"
)

// MetricsServerImage is metrics-server, built by test/images/build.sh from the module test/tools/metrics-server pins.
const MetricsServerImage = "webapp-test/metrics-server:1"

// TraefikImage is Traefik, the Gateway API implementation and Ingress controller of the exposure test, built by
// test/images/build.sh from its module.
const TraefikImage = "webapp-test/traefik:1"

// PrometheusImage is Prometheus, built from its Go module (test/tools/prometheus) by test/images/build.sh: it scrapes
// the operator and evaluates the chart's alert rules in the monitoring test.
const PrometheusImage = "webapp-test/prometheus:1"

// BuildImages builds the real node's images (the operator's from the project's Dockerfile, the test web app, the
// pause image) with test/images/build.sh into dir and returns the image tarballs. It runs outside the node's
// namespace: the builds fetch Go modules.
func BuildImages(dir string) ([]string, error) {
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(RepoRoot(), "test", "images", "build.sh"), dir)
	cmd.Env = append(os.Environ(), "WEBAPP_UPGRADE_FROM="+BeforeV2)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the images (test/images/build.sh): %w", err)
	}
	return strings.Fields(out.String()), nil
}

// RunInNamespace runs cmd (from InNamespaceCommand) to its end, passing it lock (its StartReal adopts it), and then
// sweeps what a crashed run could have left: processes of its mount namespace (containerd's shims), the kubepods
// cgroups' processes and cgroups, and the fixed paths' mount points that did not exist before. After a clean
// teardown there is nothing to sweep. The caller holds lock throughout: the kubepods cgroups it sweeps are this
// node's, no other's.
func RunInNamespace(cmd *exec.Cmd, lock *NodeLock) error {
	if lock == nil || lock.f == nil {
		return errors.New("RunInNamespace needs the real node's lock (LockNode)")
	}
	var missing []string
	for _, p := range fixedPaths {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			missing = append(missing, p)
		}
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env, cmd.ExtraFiles = lock.Inherit(cmd.Env, cmd.ExtraFiles)
	if err := cmd.Start(); err != nil {
		return err
	}
	ns := childNamespace(cmd.Process.Pid)
	runErr := cmd.Wait()
	// The lock names the run inside while it runs; it is this process's again.
	_ = lock.Announce()
	if ns != nil {
		// The open descriptor keeps the namespace, so its inode number cannot have gone to another one meanwhile.
		if name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", ns.Fd())); err == nil {
			_ = killProcsIn(name)
		}
		_ = ns.Close()
	}
	_ = killCgroupProcs()
	_ = removeKubepodsCgroups()
	for i := len(missing) - 1; i >= 0; i-- {
		_ = os.Remove(missing[i]) // only when empty: a directory someone else filled stays
	}
	return runErr
}

// childNamespace waits (5 s at most) until process pid, a child not yet waited for (so its pid is not reused), is
// in a mount namespace other than ours and returns that namespace open, or nil when it never is (it exited first).
func childNamespace(pid int) *os.File {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return nil
	}
	path := fmt.Sprintf("/proc/%d/ns/mnt", pid)
	for i := 0; i < 500; i++ {
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil && ns != self {
			return f
		}
		_ = f.Close()
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
