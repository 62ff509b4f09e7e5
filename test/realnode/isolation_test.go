package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/webapp-operator/test/cluster"
)

// Images that were not imported, and how their pull must fail: one by a registry's name, looked up on loopback,
// where nothing answers; one by a registry's address (TEST-NET-3, a documentation address), which has no route.
var missingImages = map[string]struct{ image, failure string }{
	"pull-by-name": {"missing.invalid/webapp-test/absent:1",
		"dial tcp: lookup missing.invalid on 127.0.0.1:53: read udp 127.0.0.1:"},
	"pull-by-address": {"203.0.113.7/webapp-test/absent:1",
		"dial tcp 203.0.113.7:443: connect: network is unreachable"},
}

func TestPullOfAnImageNotImportedFailsAtOnceAndSendsNothingOut(t *testing.T) {
	// Everything in the node's namespace (containerd, the kubelet, the tests) reads one resolv.conf: loopback only.
	if got := nameservers(t, "/etc/resolv.conf"); strings.Join(got, ",") != "127.0.0.1" {
		t.Fatalf("nameservers of the node's /etc/resolv.conf: %v", got)
	}
	kubeletConfig, err := os.ReadFile(filepath.Join(workDir, "cluster", "kubelet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kubeletConfig), "\nresolvConf: /etc/resolv.conf\n") {
		t.Fatalf("the kubelet's resolvConf is not the node's /etc/resolv.conf:\n%s", kubeletConfig)
	}
	// No route leads anywhere but to the node's link, its pods and its Services.
	inside := []string{cluster.NodeIP + "/24", cluster.PodCIDR, cluster.ServiceCIDR}
	for _, r := range routes(t) {
		if !within(r, inside) {
			t.Fatalf("the node's namespace has a route to %v, outside %v", r, inside)
		}
	}
	before, err := cluster.OutboundPackets()
	if err != nil {
		t.Fatal(err)
	}

	// A name lookup fails at once, on loopback.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if addrs, err := net.DefaultResolver.LookupHost(ctx, "registry.invalid"); err == nil {
		t.Fatalf("registry.invalid resolved to %v", addrs)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a failing name lookup took %v: it waited for a resolver", took)
	}

	created := time.Now()
	for pod, m := range missingImages {
		apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  containers: [{name: app, image: %q, imagePullPolicy: IfNotPresent}]
  terminationGracePeriodSeconds: 0
`, pod, m.image))
	}
	t.Cleanup(func() {
		for pod := range missingImages {
			_, _ = kubectlErr("delete", "pod", "-n", "default", pod, "--wait=false")
		}
	})
	for pod, m := range missingImages {
		var pulling, failed *corev1.Event
		eventually(t, 90*time.Second, pod+"'s pull failed", func() error {
			pulling = podEvent(t, pod, "Pulling", "Pulling image ")
			failed = podEvent(t, pod, "Failed", "Failed to pull image ")
			if pulling == nil || failed == nil {
				return fmt.Errorf("no Pulling and Failed events yet")
			}
			return nil
		})
		// The kubelet's event names the image, and the local reason.
		if want := fmt.Sprintf("Failed to pull image %q: ", m.image); !strings.HasPrefix(failed.Message, want) {
			t.Fatalf("%s: Failed event %q does not start with %q", pod, failed.Message, want)
		}
		if !strings.Contains(failed.Message, m.failure) {
			t.Fatalf("%s: Failed event %q does not say %q", pod, failed.Message, m.failure)
		}
		// At once: in the same second as the pull began, or the next (the events' times are in whole seconds).
		if took := failed.FirstTimestamp.Sub(pulling.FirstTimestamp.Time); took > time.Second {
			t.Fatalf("%s: the pull took %v to fail", pod, took)
		}
		t.Logf("%s: pull failed %v after the pod's creation: %s", pod, time.Since(created).Round(100*time.Millisecond), failed.Message)
	}
	// The pods' resolv.conf (containerd writes one per sandbox) names only loopback too.
	files, err := filepath.Glob(filepath.Join(workDir, "cluster", "containerd", "io.containerd.grpc.v1.cri", "sandboxes", "*", "resolv.conf"))
	if err != nil || len(files) < len(missingImages) {
		t.Fatalf("the pods' resolv.conf files: %v, %v", files, err)
	}
	for _, f := range files {
		if got := nameservers(t, f); strings.Join(got, ",") != "127.0.0.1" {
			t.Fatalf("nameservers of %s: %v", f, got)
		}
	}

	after, err := cluster.OutboundPackets()
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("%d packets went out through %s/%s while the pulls failed", after-before, cluster.NodeInterface, cluster.NodeInterfacePeer)
	}
	// The counters see a packet that tries to go out: one to an unused address of the node's own link (inside the
	// namespace) makes an ARP request on the pair.
	conn, err := net.Dial("udp", "10.199.0.2:9")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte("counted")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the pair's counters see a packet sent on it", func() error {
		n, err := cluster.OutboundPackets()
		if err == nil && n == after {
			err = errors.New("not counted")
		}
		return err
	})
}

func TestASecondRealNodeIsRefusedAndThisOneKeepsRunning(t *testing.T) {
	operators := strings.Join(operatorPods(t, 2), " ")
	_, err := cluster.StartReal(context.Background(), cluster.Options{Dir: t.TempDir()})
	var locked *cluster.LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("a second real node: %v, want a LockedError", err)
	}
	// The lock names this run's node (the process inside the namespace that started it).
	if locked.Holder.PID != os.Getpid() || locked.Holder.Checkout != cluster.RepoRoot() {
		t.Fatalf("the lock names %+v, not this process (%d) and checkout", locked.Holder, os.Getpid())
	}
	t.Logf("refused: %v", err)
	// Nothing of this node was torn down: the node is Ready and the operator's pods the same, running and ready.
	jsonpathEquals(t, 10*time.Second, "True", `{.status.conditions[?(@.type=="Ready")].status}`, "node/"+cluster.RealNodeName)
	if now := strings.Join(operatorPods(t, 2), " "); now != operators {
		t.Fatalf("the operator's pods changed from %s to %s", operators, now)
	}
}

// nameservers are the nameserver lines of a resolv.conf.
func nameservers(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "nameserver" {
			ns = append(ns, f[1])
		}
	}
	return ns
}

// podEvent is the first event of reason about pod in the default namespace whose message starts with prefix, or nil.
func podEvent(t *testing.T, pod, reason, prefix string) *corev1.Event {
	t.Helper()
	out := kubectl(t, "get", "events", "-n", "default", "-o", "json",
		"--field-selector", "reason="+reason+",involvedObject.name="+pod)
	var list corev1.EventList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	var first *corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if strings.HasPrefix(e.Message, prefix) && (first == nil || e.FirstTimestamp.Before(&first.FirstTimestamp)) {
			first = e
		}
	}
	return first
}

// routes are the IPv4 routes of this network namespace (/proc/self/net/route: hexadecimal, in host byte order).
func routes(t *testing.T) []net.IPNet {
	t.Helper()
	b, err := os.ReadFile("/proc/self/net/route")
	if err != nil {
		t.Fatal(err)
	}
	var nets []net.IPNet
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		f := strings.Fields(l) // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) < 8 {
			t.Fatalf("/proc/self/net/route: %q", l)
		}
		nets = append(nets, net.IPNet{IP: hexIPv4(t, f[1]), Mask: net.IPMask(hexIPv4(t, f[7]))})
	}
	if len(nets) == 0 {
		t.Fatal("no routes in the node's namespace")
	}
	return nets
}

// hexIPv4 decodes an address of /proc/net/route (little-endian on the machines this runs on).
func hexIPv4(t *testing.T, s string) net.IP {
	t.Helper()
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).To4()
}

// within reports whether the network r lies inside one of the CIDRs.
func within(r net.IPNet, cidrs []string) bool {
	ones, _ := r.Mask.Size()
	for _, c := range cidrs {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			panic(err)
		}
		if o, _ := n.Mask.Size(); n.Contains(r.IP) && ones >= o {
			return true
		}
	}
	return false
}
