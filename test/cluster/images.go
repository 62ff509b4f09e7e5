package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BuildImages builds the real node's images (the operator's from the project's Dockerfile, the test web app, the
// pause image) with test/images/build.sh into dir and returns the image tarballs. It runs outside the node's
// namespace: the builds fetch Go modules.
func BuildImages(dir string) ([]string, error) {
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(RepoRoot(), "test", "images", "build.sh"), dir)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the images (test/images/build.sh): %w", err)
	}
	return strings.Fields(out.String()), nil
}

// RunInNamespace runs cmd (from InNamespaceCommand) to its end and then sweeps what a crashed run could have left:
// processes of its mount namespace (containerd's shims), the kubepods cgroups' processes and cgroups, and the
// fixed paths' mount points that did not exist before. After a clean teardown there is nothing to sweep.
func RunInNamespace(cmd *exec.Cmd) error {
	var missing []string
	for _, p := range fixedPaths {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			missing = append(missing, p)
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	ns := childNamespace(cmd.Process.Pid)
	runErr := cmd.Wait()
	if ns != "" {
		_ = killProcsIn(ns)
	}
	_ = killCgroupProcs()
	_ = removeKubepodsCgroups()
	for i := len(missing) - 1; i >= 0; i-- {
		_ = os.Remove(missing[i]) // only when empty: a directory someone else filled stays
	}
	return runErr
}

// childNamespace waits (5 s at most) until process pid is in a mount namespace other than ours and returns it, or
// "" when it never is (it exited first).
func childNamespace(pid int) string {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return ""
	}
	for i := 0; i < 500; i++ {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil {
			return ""
		}
		if ns != self {
			return ns
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ""
}
