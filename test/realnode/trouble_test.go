package realnode

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

// TestPodTroubleIsReportedWithinSeconds: an image that cannot be pulled, a crash loop, a pod no node can take and a
// failing readiness probe are each in Ready's reason and message within seconds of the first pod event that says
// so (printed, with the time from the WebApp's apply), with the pods' count; a crash-looping WebApp then costs no
// status write per restart.
func TestPodTroubleIsReportedWithinSeconds(t *testing.T) {
	ensureAppNamespace(t)
	cases := []struct {
		name, image, container, reason, inMessage string
		event                                     string // the reason of the first pod event that shows the trouble
	}{
		{"pull", "missing.invalid/webapp-test/absent:1", "", "ImagePullBackOff", `2/2 pods cannot pull image "missing.invalid/webapp-test/absent:1"`, "Failed"},
		{"crash", cluster.WebserverImage, `args: ["--listen=nowhere"]`, "CrashLoopBackOff", "2/2 pods CrashLoopBackOff: container app exited with code 1", "BackOff"},
		{"nospace", cluster.WebserverImage, `resources: {requests: {cpu: "1000"}}`, "Unschedulable", "2/2 pods unschedulable: 0/1 nodes are available: 1 Insufficient cpu", "FailedScheduling"},
		// It listens 20 s after it starts, so its first probes are refused and the later ones answered 500: the
		// message follows the probes' words (an event that changes no object the operator watches). (Two probe
		// periods: the kubelet's first probe of a container may come up to a period after it started, and 5 s let a
		// CI run's first probe find it listening already.)
		{"notready", cluster.WebserverImage, `args: ["--fail-healthz", "--listen-after=20s"], healthCheckPath: /healthz`, "ReadinessFailing", "2/2 pods not ready: Readiness probe failed: HTTP probe failed with statuscode: 500", "Unhealthy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "trouble-" + tc.name
			start := time.Now()
			apply(t, fmt.Sprintf(`apiVersion: example.com/v2
kind: WebApp
metadata: {name: %s, namespace: %s}
spec:
  image: %s
  replicas: 2
  ports: [{name: http, port: 8080}]
  container: {%s}
`, name, appNS, tc.image, tc.container))
			defer kubectl(t, "delete", "-n", appNS, "webapp/"+name, "--wait=false")
			jsonpathEquals(t, 2*time.Minute, tc.reason, `{.status.conditions[?(@.type=="Ready")].reason}`, "-n", appNS, "webapp/"+name)
			seen := time.Now()
			took := seen.Sub(start)
			first := firstPodEvent(t, name, tc.event, start)
			// Then with every pod counted (a second pod may report a moment later).
			eventually(t, time.Minute, "Ready's message says "+tc.inMessage, func() error {
				msg, err := kubectlErr("get", "-n", appNS, "webapp/"+name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
				if err == nil && !strings.Contains(msg, tc.inMessage) {
					err = fmt.Errorf("it says %q", msg)
				}
				return err
			})
			fmt.Printf("realnode: pod trouble %s: Ready=False %s %.1fs after the first pod event %s (%.1fs after the apply), for every pod %.1fs after the apply\n",
				tc.name, tc.reason, seen.Sub(first).Seconds(), tc.event, took.Seconds(), time.Since(start).Seconds())
			if tc.name == "notready" {
				// The words it ended with were not the first: a probe was refused before the app listened.
				events := jsonpath(t, `{range .items[?(@.reason=="Unhealthy")]}{.involvedObject.name}{" "}{.message}{"\n"}{end}`, "-n", appNS, "events")
				if !slices.ContainsFunc(strings.Split(events, "\n"), func(l string) bool {
					return strings.HasPrefix(l, name+"-") && strings.HasSuffix(l, "connect: connection refused")
				}) {
					t.Errorf("no probe of a pod of %s was refused before it listened; the events say:\n%s", name, events)
				}
			}
			if tc.name != "crash" {
				return
			}
			// Restarts alone change nothing the status says: no write while the pods restart twice more.
			rv := jsonpath(t, "{.metadata.resourceVersion}", "-n", appNS, "webapp/"+name)
			restarts := func() int {
				n := 0
				for _, f := range strings.Fields(jsonpath(t, "{.items[*].status.containerStatuses[0].restartCount}", "-n", appNS, "pods", "-l", "app.kubernetes.io/instance="+name)) {
					v, _ := strconv.Atoi(f)
					n += v
				}
				return n
			}
			before := restarts()
			eventually(t, 3*time.Minute, "two more restarts", func() error {
				if n := restarts(); n < before+2 {
					return fmt.Errorf("%d restarts, %d before", n, before)
				}
				return nil
			})
			if now := jsonpath(t, "{.metadata.resourceVersion}", "-n", appNS, "webapp/"+name); now != rv {
				t.Errorf("the WebApp was written while its pods restarted (resourceVersion %s -> %s)", rv, now)
			}
		})
	}
}

// firstPodEvent is when the first event of reason about one of a WebApp's pods happened since start (to the
// microsecond where its reporter says, else to the second).
func firstPodEvent(t *testing.T, webApp, reason string, start time.Time) time.Time {
	t.Helper()
	var first time.Time
	for _, line := range strings.Split(jsonpath(t, `{range .items[*]}{.involvedObject.name} {.eventTime} {.firstTimestamp}{"\n"}{end}`, "-n", appNS, "events", "--field-selector", "reason="+reason), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], webApp+"-") {
			continue
		}
		for _, v := range f[1:] {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err == nil && !at.Before(start.Truncate(time.Second)) && (first.IsZero() || at.Before(first)) {
				first = at
				break
			}
		}
	}
	if first.IsZero() {
		t.Fatalf("no %s event of a pod of %s", reason, webApp)
	}
	return first
}
