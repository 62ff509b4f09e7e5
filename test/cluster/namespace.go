package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// The network rule of the real node: everything of it (control plane, containerd, kubelet, kube-proxy, the pods)
// runs inside one network and mount namespace of its own, and nothing sends traffic to a pod or Service address
// from outside it. Outside that namespace a request to a ClusterIP made before kube-proxy wrote its rules would
// leave the machine.

// InPrivateNamespace reports whether this process's network and mount namespaces differ from the machine's.
func InPrivateNamespace() (bool, error) {
	for _, ns := range []string{"net", "mnt"} {
		self, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return false, err
		}
		machine, err := machineNamespace(ns)
		if err != nil {
			return false, err
		}
		if self == machine {
			return false, nil
		}
	}
	return true, nil
}

// machineNamespace is PID 1's namespace of the kind ns; where PID 1 hides it (some VM inits are not readable even
// by root), that of PID 2 when it is the kernel's kthreadd, which always lives in the initial namespaces.
func machineNamespace(ns string) (string, error) {
	link, err := os.Readlink("/proc/1/ns/" + ns)
	if err == nil {
		return link, nil
	}
	if comm, cerr := os.ReadFile("/proc/2/comm"); cerr == nil && strings.TrimSpace(string(comm)) == "kthreadd" {
		if link, kerr := os.Readlink("/proc/2/ns/" + ns); kerr == nil {
			return link, nil
		}
	}
	return "", fmt.Errorf("reading PID 1's %s namespace (the real node needs root): %w", ns, err)
}

// requirePrivateNamespace refuses to go on outside a private network and mount namespace.
func requirePrivateNamespace() error {
	ok, err := InPrivateNamespace()
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the real node runs only inside a network and mount namespace of its own " +
			"(unshare --net --mount); refusing to start it in the machine's namespaces")
	}
	return nil
}

// InNamespaceCommand returns a command that runs exe with args in a new network and mount namespace (mounts
// private: none propagates back). With dieWithParent it is killed when the caller dies.
func InNamespaceCommand(dieWithParent bool, exe string, args ...string) *exec.Cmd {
	cmd := exec.Command("unshare", append([]string{"--net", "--mount", "--propagation", "private", "--", exe}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if dieWithParent {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	return cmd
}
