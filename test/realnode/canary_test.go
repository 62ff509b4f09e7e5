package realnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

// sample is one request through the Gateway: when it was answered, by which version, and whether it failed.
type sample struct {
	at     time.Time
	canary bool
	failed bool
	took   time.Duration
	// redialled: its first connection was not made within 3 s, and a second one was (patientGet).
	redialled bool
}

// patientGet GETs url naming host on a new connection, and waits up to 10 s for the answer: on two shared cores a
// request can wait seconds for CPU (an operator restart, a rollout's new pods starting), which is latency, not a
// failed request; the slowest answers are printed. A connection not made within 3 s (a SYN lost in the node's NAT
// waits out TCP's retransmits, 1, 3, 7 s...) is made again once: that request never reached the Gateway, so
// nothing about routing is hidden by it; redialled says it happened, and the count is printed.
func patientGet(url, host string) (code int, body string, redialled bool, err error) {
	code, body, err = getDialingWithin(3*time.Second, 10*time.Second, url, host)
	if notConnected(err) {
		redialled = true
		code, body, err = getDialingWithin(3*time.Second, 10*time.Second, url, host)
	}
	return code, body, redialled, err
}

// getDialingWithin GETs url naming host on a new connection made within dial, the whole request within timeout.
func getDialingWithin(dial, timeout time.Duration, url, host string) (int, string, error) {
	return send(&http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{Timeout: dial}).DialContext}}, url, host, "")
}

// notConnected reports whether err is a connection that was never made (the dial failed).
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// slow counts the answers in [from, to) that took over a second, the slowest, and those redialled.
func (r *recorder) slow(from, to time.Time) (n int, slowest time.Duration, redialled int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if s.at.Before(from) || !s.at.Before(to) {
			continue
		}
		if s.took > time.Second {
			n++
		}
		if s.redialled {
			redialled++
		}
		slowest = max(slowest, s.took)
	}
	return n, slowest, redialled
}

// recorder sends continuous load through the Gateway from 4 clients and keeps every answer.
type recorder struct {
	mu       sync.Mutex
	samples  []sample
	failures []string // the first five failures, with when they were answered
	stop     chan struct{}
	done     sync.WaitGroup
}

// cnyHost is the host of the canary test's WebApp.
const cnyHost = "cny.shop.test"

// record sends load to url naming cnyHost; an answer of a pod named cny-canary-* is the canary's.
func record(url string) *recorder {
	r := &recorder{stop: make(chan struct{})}
	for range 4 {
		r.done.Add(1)
		go func() {
			defer r.done.Done()
			for {
				select {
				case <-r.stop:
					return
				default:
				}
				began := time.Now()
				code, body, redialled, err := patientGet(url, cnyHost)
				s := sample{at: time.Now(), failed: err != nil || code != http.StatusOK, took: time.Since(began), redialled: redialled}
				var rep reply
				if !s.failed && json.Unmarshal([]byte(body), &rep) == nil {
					s.canary = strings.HasPrefix(rep.Hostname, "cny-canary-")
				}
				r.mu.Lock()
				r.samples = append(r.samples, s)
				if s.failed {
					// Every failure's words, the first few: which phase of a request hung tells why.
					if len(r.failures) < 5 {
						r.failures = append(r.failures, fmt.Sprintf("%s: %d %q %v", s.at.Format("15:04:05.000"), code, body, err))
					}
				}
				r.mu.Unlock()
			}
		}()
	}
	return r
}

// failed is the first failures' words, or "none".
func (r *recorder) failed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == 0 {
		return "none"
	}
	return strings.Join(r.failures, "; ")
}

func (r *recorder) end() {
	close(r.stop)
	r.done.Wait()
}

// between counts the answers in [from, to): all, the canary's, and the failed.
func (r *recorder) between(from, to time.Time) (n, canary, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if s.at.Before(from) || !s.at.Before(to) {
			continue
		}
		n++
		if s.canary {
			canary++
		}
		if s.failed {
			failed++
		}
	}
	return n, canary, failed
}

// canaryPhase is the WebApp's status.canary as phase/step/weight/stepStartedAt.
func canaryPhase(t *testing.T, name string) string {
	return jsonpath(t, "{.status.canary.phase}/{.status.canary.step}/{.status.canary.weight}/{.status.canary.stepStartedAt}", "-n", appNS, "webapp/"+name)
}

// TestCanaryThroughTheGateway: through Traefik's Gateway under continuous load, a good version is promoted step by
// step with no failed request and each step's split measured, every operator pod replaced in its last pause; a version that crash-loops is rolled back within
// seconds of its first back-off; one that answers 500s is rolled back by a Prometheus check on the gateway's own
// metrics. The failed client requests of each are printed.
func TestCanaryThroughTheGateway(t *testing.T) {
	ensureAppNamespace(t)
	traefik := startGateway(t)
	// Traefik's own metrics, which the 500s check reads.
	prom := deployPrometheus(t, "1h", "- job_name: traefik\n  static_configs: [{targets: ['"+jsonpath(t, "{.spec.clusterIP}", "-n", traefikNS, "service/traefik")+":8080']}]\n")
	defer deleteWebApps(t, "cny")

	withSteps := func(image, args, checks, steps string) string {
		return webAppV2(appNS, "cny", image, 4, `  container:
    healthCheckPath: /healthz
    drainSeconds: 10
`+args+`  expose: {hosts: [cny.shop.test], gateway: {name: public, namespace: traefik-system}}
  rollout:
    canary:
      steps: `+steps+`
`+checks)
	}
	spec := func(image, args, checks string, pause int) string {
		return withSteps(image, args, checks, fmt.Sprintf("[{weight: 20, pauseSeconds: %d}, {weight: 50, pauseSeconds: %d}]", pause, pause))
	}
	apply(t, spec(cluster.WebserverImage, "", "", 15))
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/cny")
	jsonpathEquals(t, time.Minute, "True", `{.status.conditions[?(@.type=="Exposed")].status}`, "-n", appNS, "webapp/cny")
	eventually(t, time.Minute, "cny answers through the Gateway", func() error { return servesThrough(traefik, "cny.shop.test") })

	t.Run("a good version is promoted step by step with no failed request, across an operator restart", func(t *testing.T) {
		load := record(traefik)
		start := time.Now()
		apply(t, spec("webapp-test/webserver:2", "", "", 15))
		// Each step's window: from when its pause started (the canary ready at its weight) to the next change.
		type window struct {
			weight   int
			from, to time.Time
		}
		var windows []window
		weights := []int{20, 50}
		restarted := false
		var changes []string
		last := ""
		eventually(t, 4*time.Minute, "promoted", func() error {
			st := canaryPhase(t, "cny")
			if st != last {
				now := time.Now()
				changes = append(changes, now.Format("15:04:05.000")+" "+st)
				if n := len(windows); n > 0 && windows[n-1].to.IsZero() {
					windows[n-1].to = now
				}
				// A step's window opens once the route carries its weight (after the canary's warm-up).
				var step, w int
				if parts := strings.Split(st, "/"); parts[0] == "Canary" && parts[3] != "" {
					_, _ = fmt.Sscan(parts[1], &step)
					_, _ = fmt.Sscan(parts[2], &w)
					if step < len(weights) && w == weights[step] {
						windows = append(windows, window{weight: w, from: now})
					}
					if step == 1 && w == weights[1] && !restarted {
						// A restart mid-canary: every operator pod replaced, a new leader elected in the pause.
						kubectl(t, "delete", "pod", "-n", operatorNS, "-l", "app.kubernetes.io/name=webapp-operator", "--wait=false")
						restarted = true
					}
				}
				last = st
			}
			if !strings.HasPrefix(st, "Stable/") || time.Since(start) < 5*time.Second {
				return fmt.Errorf("status.canary %s", st)
			}
			return nil
		})
		took := time.Since(start)
		fmt.Printf("realnode: canary: status changes: %s\n", strings.Join(changes, ", "))
		// A moment more of load on the promoted version alone.
		time.Sleep(3 * time.Second)
		load.end()
		n, _, failed := load.between(start, time.Now())
		slow, slowest, redialled := load.slow(start, time.Now())
		fmt.Printf("realnode: canary: promoted through 20%% and 50%% in %.0fs, every operator pod replaced in the last pause; %d of %d requests through the Gateway failed (%s); %d took over 1 s (slowest %.1fs); %d connected only at a second dial\n",
			took.Seconds(), failed, n, load.failed(), slow, slowest.Seconds(), redialled)
		if failed != 0 {
			t.Errorf("%d of %d requests failed during the canary: %s", failed, n, load.failed())
		}
		// The new leader resumed the pause where it was: the step's state was written once.
		if n := strings.Count(strings.Join(changes, ","), "Canary/1/50/"); n != 1 {
			t.Errorf("the paused step's status changed across the operator's restart: %s", strings.Join(changes, ", "))
		}
		if len(windows) != 2 {
			t.Fatalf("step windows %+v, want one for each of the 2 steps", windows)
		}
		for _, w := range windows {
			// From when the gateway has followed the route (Traefik applies a provider's changes within 2 s).
			n, canary, _ := load.between(w.from.Add(3*time.Second), w.to)
			share := 100 * float64(canary) / float64(max(n, 1))
			fmt.Printf("realnode: canary: step at %d%%: %d of %d requests (%.1f%%) answered by the canary\n", w.weight, canary, n, share)
			// Which backend answers a request is a draw of weight percent: the share of n requests is binomial, so it
			// must be within 4 of its standard deviations (and at least 5 points) of the weight, over at least 400
			// requests. How many requests a pause sees is the machine's (a cold two-core run saw 678 in a pause
			// where a warm one sees over 1,000), not the route's.
			p := float64(w.weight) / 100
			tol := max(5, 4*100*math.Sqrt(p*(1-p)/float64(max(n, 1))))
			if n < 400 || math.Abs(share-float64(w.weight)) > tol {
				t.Errorf("step at %d%%: %d of %d requests (%.1f%%) by the canary, want within %.1f points (4 standard deviations, at least 5) over at least 400", w.weight, canary, n, share, tol)
			}
		}
		jsonpathEquals(t, time.Minute, "webapp-test/webserver:2", "{.spec.template.spec.containers[0].image}", "-n", appNS, "deployment/cny")
		eventually(t, time.Minute, "the canary gone", func() error {
			if out, err := kubectlErr("get", "-n", appNS, "deployment/cny-canary", "service/cny-canary"); err == nil {
				return fmt.Errorf("still there: %s", out)
			}
			return nil
		})
	})

	t.Run("a version that crash-loops is rolled back within seconds of its first back-off", func(t *testing.T) {
		load := record(traefik)
		start := time.Now()
		apply(t, spec("webapp-test/webserver:2", "    args: [--listen=nowhere]\n", "", 15))
		var backOff time.Time
		eventually(t, 3*time.Minute, "rolled back", func() error {
			if backOff.IsZero() && strings.Contains(jsonpath(t, "{.items[*].status.containerStatuses[*].state.waiting.reason}", "-n", appNS, "pods", "-l", "webapp.example.com/canary-of=cny"), "CrashLoopBackOff") {
				backOff = time.Now()
			}
			if st := canaryPhase(t, "cny"); !strings.HasPrefix(st, "RolledBack/") {
				return fmt.Errorf("status.canary %s", st)
			}
			return nil
		})
		rolledBack := time.Now()
		load.end()
		n, _, failed := load.between(start, rolledBack)
		reason := jsonpath(t, "{.status.canary.reason}: {.status.canary.message}", "-n", appNS, "webapp/cny")
		after := "before any pod showed CrashLoopBackOff to a 200 ms poll"
		if !backOff.IsZero() {
			after = fmt.Sprintf("%.1fs after the first CrashLoopBackOff seen", rolledBack.Sub(backOff).Seconds())
		}
		fmt.Printf("realnode: canary: crash loop rolled back %.1fs after the apply, %s (%s); %d of %d requests failed\n",
			rolledBack.Sub(start).Seconds(), after, reason, failed, n)
		if !backOff.IsZero() && rolledBack.Sub(backOff) > 15*time.Second {
			t.Errorf("rolled back %s, want within 15s", after)
		}
		if !strings.HasPrefix(reason, "CrashLoopBackOff") {
			t.Errorf("status.canary says %q, want the reason CrashLoopBackOff", reason)
		}
		if failed != 0 {
			t.Errorf("%d of %d requests failed: a canary that is never ready must get no traffic: %s", failed, n, load.failed())
		}
		jsonpathEquals(t, time.Minute, "webapp-test/webserver:2//", "{.spec.template.spec.containers[0].image}/{.spec.template.spec.containers[0].args}/", "-n", appNS, "deployment/cny")
	})

	t.Run("a version that answers 500s is rolled back by a Prometheus check on the gateway's metrics", func(t *testing.T) {
		// The canary's share of 5xx answers, as Traefik counts them for its Service (0 while it has no traffic yet).
		query := `(sum(rate(traefik_service_requests_total{service=~".*cny-canary.*",code=~"5.."}[20s])) / sum(rate(traefik_service_requests_total{service=~".*cny-canary.*"}[20s]))) or vector(0)`
		checks := fmt.Sprintf(`      checks: [{name: errors, prometheus: {address: %q, query: %q}, max: "0.05", failuresAllowed: 1}]
      checkIntervalSeconds: 5
`, prom, query)
		load := record(traefik)
		start := time.Now()
		apply(t, spec("webapp-test/webserver:2", "    args: [--fail-root]\n", checks, 60))
		eventually(t, 3*time.Minute, "rolled back", func() error {
			if st := canaryPhase(t, "cny"); !strings.HasPrefix(st, "RolledBack/") || jsonpath(t, "{.status.canary.reason}", "-n", appNS, "webapp/cny") != "CheckFailed" {
				return fmt.Errorf("status.canary %s", st)
			}
			return nil
		})
		rolledBack := time.Now()
		time.Sleep(3 * time.Second)
		load.end()
		n, _, failed := load.between(start, rolledBack)
		_, _, after := load.between(rolledBack.Add(2*time.Second), time.Now())
		msg := jsonpath(t, "{.status.canary.message}", "-n", appNS, "webapp/cny")
		fmt.Printf("realnode: canary: 500s rolled back by the check %.1fs after the apply (%s); %d of %d requests failed before, %d after\n",
			rolledBack.Sub(start).Seconds(), msg, failed, n, after)
		if !strings.Contains(msg, "check errors") {
			t.Errorf("status.canary.message %q does not name the check", msg)
		}
		if after != 0 {
			t.Errorf("%d requests failed after the rollback", after)
		}
		jsonpathEquals(t, time.Minute, "[]", "[{.spec.template.spec.containers[0].args}]", "-n", appNS, "deployment/cny")
	})

	t.Run("a header match sends exactly the matching requests to the canary, and an abort takes them back at once", func(t *testing.T) {
		// The clients without the header: every one of their requests must stay on the stable version.
		load := record(traefik)
		start := time.Now()
		apply(t, withSteps("webapp-test/webserver:2", "    env: [{name: AB, value: b}]\n", "",
			"[{weight: 0, matches: [{headers: [{name: X-Canary, value: always}]}], gate: {}}]"))
		eventually(t, 3*time.Minute, "held at the gate", func() error {
			if st := jsonpath(t, "{.status.canary.phase}/{.status.canary.gateSince}", "-n", appNS, "webapp/cny"); !strings.HasPrefix(st, "Canary/") || strings.HasSuffix(st, "/") {
				return fmt.Errorf("status.canary %s", st)
			}
			return nil
		})
		// Traefik applies a provider's change within 2 s.
		eventually(t, 30*time.Second, "a request with the header answered by the canary", func() error {
			if canary, _, _ := tally(traefik, "always", 1); canary != 1 {
				return errors.New("answered by the stable version")
			}
			return nil
		})
		from := time.Now()
		matching, failedMatching, words := tally(traefik, "always", 200)
		other, failedOther, otherWords := tally(traefik, "never", 200)
		n, canary, failed := load.between(from, time.Now())
		fmt.Printf("realnode: canary: header match: %d of 200 requests with X-Canary: always answered by the canary (%d failed), %d of 200 with another value (%d failed), %d of %d without the header (%d failed)\n",
			matching, failedMatching, other, failedOther, canary, n, failed)
		if matching != 200 || other != 0 || canary != 0 || failedMatching+failedOther+failed != 0 {
			t.Errorf("with the header %d of 200 by the canary, with another value %d, without %d of %d; failed %d, %d, %d (%s; %s; %s): want exactly the matching requests at the canary, none failed",
				matching, other, canary, n, failedMatching, failedOther, failed, words, otherWords, load.failed())
		}
		// A person aborts it: the matching requests go back to the stable version at once.
		rev := jsonpath(t, "{.status.canary.canaryRevision}", "-n", appNS, "webapp/cny")
		aborted := time.Now()
		kubectl(t, "annotate", "--overwrite", "-n", appNS, "webapp/cny", "webapp.example.com/action=abort "+rev)
		eventually(t, 30*time.Second, "a request with the header answered by the stable version", func() error {
			if canary, _, _ := tally(traefik, "always", 1); canary != 0 {
				return errors.New("answered by the canary")
			}
			return nil
		})
		back := time.Since(aborted)
		after, failedAfter, afterWords := tally(traefik, "always", 100)
		load.end()
		total, _, failedTotal := load.between(start, time.Now())
		reason := jsonpath(t, "{.status.canary.phase}: {.status.canary.reason}", "-n", appNS, "webapp/cny")
		fmt.Printf("realnode: canary: aborted (%s): requests with the header back on the stable version %.1fs after the annotation, %d of 100 then at the canary (%d failed); %d of %d requests without the header failed throughout\n",
			reason, back.Seconds(), after, failedAfter, failedTotal, total)
		if reason != "RolledBack: Aborted" || after != 0 || failedAfter != 0 || failedTotal != 0 {
			t.Errorf("after the abort: %s, %d of 100 with the header at the canary, %d failed (%s), %d of %d without (%s)", reason, after, failedAfter, afterWords, failedTotal, total, load.failed())
		}
		jsonpathEquals(t, 30*time.Second, "1", "{.spec.rules[*].backendRefs[*].weight}", "-n", appNS, "httproute/cny")
	})

	t.Run("a webhook check that fails rolls the canary back", func(t *testing.T) {
		// The judge is the stable version's own POST /judge (the test image's), through its Service's address: it
		// answers the value it is asked for, 1 here, above the check's max.
		judge := "http://" + jsonpath(t, "{.spec.clusterIP}", "-n", appNS, "service/cny") + ":8080/judge?value=1"
		checks := fmt.Sprintf(`      checks: [{name: judge, webhook: {url: %q, timeoutSeconds: 2}, max: "0.5"}]
      checkIntervalSeconds: 2
`, judge)
		load := record(traefik)
		start := time.Now()
		apply(t, withSteps("webapp-test/webserver:2", "    env: [{name: AB, value: j}]\n", checks, "[{weight: 20, pauseSeconds: 60}]"))
		eventually(t, 3*time.Minute, "rolled back", func() error {
			if st := jsonpath(t, "{.status.canary.phase}: {.status.canary.reason}", "-n", appNS, "webapp/cny"); st != "RolledBack: CheckFailed" {
				return fmt.Errorf("status.canary %s", st)
			}
			return nil
		})
		took := time.Since(start)
		time.Sleep(3 * time.Second)
		load.end()
		n, _, failed := load.between(start, time.Now())
		msg := jsonpath(t, "{.status.canary.message}", "-n", appNS, "webapp/cny")
		address := jsonpath(t, "{.status.canary.checks[0].address}", "-n", appNS, "webapp/cny")
		fmt.Printf("realnode: canary: a webhook check answering 1 (max 0.5) rolled the canary back %.1fs after the apply (%s); %d of %d requests failed\n", took.Seconds(), msg, failed, n)
		if msg != "check judge: 1 > 0.5 (failures 1, allowed 0)" || address != judge || failed != 0 {
			t.Errorf("rolled back with %q (the check's address %q), %d of %d requests failed (%s): want the webhook's value named, none failed", msg, address, failed, n, load.failed())
		}
	})

	const preview = "cny-preview.shop.test"
	// blueGreen is the WebApp of version env (a value of env var AB) with a blue/green held at its gate.
	blueGreen := func(env string, keep int) string {
		return webAppV2(appNS, "cny", "webapp-test/webserver:2", 4, `  container:
    healthCheckPath: /healthz
    drainSeconds: 10
    env: [{name: AB, value: `+env+`}]
  expose: {hosts: [cny.shop.test], gateway: {name: public, namespace: traefik-system}}
  rollout:
    canary:
      blueGreen: {previewHost: `+preview+`, gate: {}, keepSeconds: `+strconv.Itoa(keep)+`}
`)
	}
	heldAtTheGate := func(t *testing.T) {
		eventually(t, 3*time.Minute, "previewed, held at the gate", func() error {
			// (Step 0 and weight 0 are left out of the status.)
			if st := jsonpath(t, "{.status.canary.phase}/{.status.canary.step}/{.status.canary.gateSince}", "-n", appNS, "webapp/cny"); !strings.HasPrefix(st, "Canary//") || strings.HasSuffix(st, "/") {
				return fmt.Errorf("status.canary %s", st)
			}
			return nil
		})
	}
	t.Run("a blue/green is previewed at full size with no traffic, switched at once, and promoted, no request failed", func(t *testing.T) {
		bg := blueGreen("g", 20)
		load := record(traefik)
		start := time.Now()
		apply(t, bg)
		heldAtTheGate(t)
		pods := jsonpath(t, "{.status.availableReplicas}", "-n", appNS, "deployment/cny-canary")
		eventually(t, 30*time.Second, "the preview host answered by the new version", func() error {
			if canary, _, _ := tallyHost(traefik, preview, "", 1); canary != 1 {
				return errors.New("not answered by the new version")
			}
			return nil
		})
		previewed, failedPreview, previewWords := tallyHost(traefik, preview, "", 100)
		n, canary, failed := load.between(start, time.Now())
		fmt.Printf("realnode: blue/green: previewed at %s pods; %d of 100 requests to %s answered by the new version (%d failed); %d of %d production requests answered by it (%d failed)\n",
			pods, previewed, preview, failedPreview, canary, n, failed)
		if pods != "4" || previewed != 100 || failedPreview != 0 || canary != 0 {
			t.Errorf("the preview: %s pods, %d of 100 at the preview host by the new version (%d failed: %s), %d of %d production requests by it: want 4, 100, 0, 0",
				pods, previewed, failedPreview, previewWords, canary, n)
		}
		// A person promotes it: all the traffic switches at once (after the gateway's warm-up of the route).
		rev := jsonpath(t, "{.status.canary.canaryRevision}", "-n", appNS, "webapp/cny")
		promoted := time.Now()
		kubectl(t, "annotate", "--overwrite", "-n", appNS, "webapp/cny", "webapp.example.com/action=promote "+rev+"/0")
		var switched time.Time
		eventually(t, time.Minute, "every production request answered by the new version", func() error {
			if canary, _, _ := tally(traefik, "", 1); canary != 1 {
				return errors.New("answered by the version before")
			}
			switched = time.Now()
			return nil
		})
		// The keep: every request on the new version, the version before still running at full size.
		keepFrom := switched.Add(2 * time.Second)
		time.Sleep(10 * time.Second)
		kn, kcanary, kfailed := load.between(keepFrom, time.Now())
		before := jsonpath(t, "{.status.availableReplicas}", "-n", appNS, "deployment/cny")
		eventually(t, 3*time.Minute, "promoted", func() error {
			if st := jsonpath(t, "{.status.canary.phase}", "-n", appNS, "webapp/cny"); st != "Stable" {
				return fmt.Errorf("status.canary.phase %s", st)
			}
			return nil
		})
		done := time.Since(promoted)
		time.Sleep(3 * time.Second)
		load.end()
		total, _, failedTotal := load.between(start, time.Now())
		fmt.Printf("realnode: blue/green: switched %.1fs after the promotion; in the keep %d of %d requests answered by the new version (%d failed), the version before at %s pods; promoted %.0fs after the switch's promotion; %d of %d requests failed throughout (%s)\n",
			switched.Sub(promoted).Seconds(), kcanary, kn, kfailed, before, done.Seconds(), failedTotal, total, load.failed())
		if kcanary != kn || kn < 100 || before != "4" || failedTotal != 0 {
			t.Errorf("the keep: %d of %d by the new version, the version before at %s pods; %d of %d failed (%s): want all, 4, none", kcanary, kn, before, failedTotal, total, load.failed())
		}
		if switched.Sub(promoted) > 15*time.Second {
			t.Errorf("the switch took %s after the promotion", switched.Sub(promoted))
		}
		jsonpathEquals(t, 30*time.Second, "1", "{.spec.rules[*].backendRefs[*].weight}", "-n", appNS, "httproute/cny")
		eventually(t, 30*time.Second, "the preview route gone", func() error { return goneFromApps("httproute/cny-canary") })
	})

	t.Run("a spec set back after a blue/green's switch takes the traffic back at once, no request failed, the new version's pods retiring after", func(t *testing.T) {
		// The version the last subtest promoted (AB=g) serves; a new one (AB=h) is previewed, then switched to.
		apply(t, blueGreen("h", 3600))
		heldAtTheGate(t)
		rev := jsonpath(t, "{.status.canary.canaryRevision}", "-n", appNS, "webapp/cny")
		kubectl(t, "annotate", "--overwrite", "-n", appNS, "webapp/cny", "webapp.example.com/action=promote "+rev+"/0")
		eventually(t, time.Minute, "every production request answered by the new version", func() error {
			if canary, _, _ := tally(traefik, "", 1); canary != 1 {
				return errors.New("answered by the version before")
			}
			return nil
		})
		load := record(traefik)
		start := time.Now()
		time.Sleep(2 * time.Second)
		// The spec set back to the version before, as reverting a commit does, in the keep.
		reverted := time.Now()
		apply(t, blueGreen("g", 3600))
		// The route left the new version when the status says its pods retire (read at once: it lasts 10 s).
		var retiring, since string
		eventually(t, 10*time.Second, "the new version retiring", func() error {
			if retiring, since = jsonpath(t, "{.status.canary.retiringRevision}", "-n", appNS, "webapp/cny"), jsonpath(t, "{.status.canary.retiringSince}", "-n", appNS, "webapp/cny"); retiring == "" {
				return errors.New("status.canary.retiringRevision not set")
			}
			return nil
		})
		var back time.Time
		eventually(t, time.Minute, "every production request answered by the version before", func() error {
			if canary, _, _ := tally(traefik, "", 1); canary != 0 {
				return errors.New("answered by the new version")
			}
			back = time.Now()
			return nil
		})
		var goneAt time.Time
		eventually(t, time.Minute, "the new version's Deployment gone", func() error {
			err := goneFromApps("deployment/cny-canary")
			goneAt = time.Now()
			return err
		})
		sinceAt, err := time.Parse(time.RFC3339, since)
		if err != nil {
			t.Fatalf("status.canary.retiringSince %q: %v", since, err)
		}
		// (retiringSince is kept to the second: the Deployment may go up to a second before 10 s from the route's change.)
		goneAfter := goneAt.Sub(sinceAt)
		time.Sleep(3 * time.Second)
		load.end()
		n, canary, failed := load.between(start, time.Now())
		after, afterCanary, _ := load.between(back.Add(3*time.Second), time.Now())
		fmt.Printf("realnode: blue/green: the spec set back in the keep: all the traffic back %.1fs after the apply, revision %s retiring, its Deployment gone %.0fs after the route left it; %d of %d requests failed (%s); %d of %d answered by the new version after the switch back\n",
			back.Sub(reverted).Seconds(), retiring, goneAfter.Seconds(), failed, n, load.failed(), afterCanary, after)
		if failed != 0 || retiring != rev || afterCanary != 0 || canary == 0 || goneAfter < 9*time.Second {
			t.Errorf("set back in the keep: %d of %d failed (%s), retiring %q (want %s), %d of %d answered by the new version 3 s after the switch back, gone %s after the route left it: want 0 failed, it retiring, none, gone after 10 s",
				failed, n, load.failed(), retiring, rev, afterCanary, after, goneAfter)
		}
		if back.Sub(reverted) > 15*time.Second {
			t.Errorf("the traffic came back %s after the apply", back.Sub(reverted))
		}
	})

	t.Run("a version kept warm after its promotion takes all the traffic at once when the spec is set back, no request failed", func(t *testing.T) {
		// The version the last subtest set back to (AB=g) serves. A new one (AB=k) is switched to and promoted, the
		// version before kept warm for the rollback window; then the spec is set back to it, as reverting a commit
		// does.
		warm := func(env string) string {
			return blueGreen(env, 0) + "      rollbackWindowSeconds: 600\n      keepPreviousWarm: true\n"
		}
		// promotedKeepingWarm switches to k and promotes it, and returns the version before, kept warm at 4 ready pods.
		promotedKeepingWarm := func() string {
			t.Helper()
			apply(t, warm("k"))
			heldAtTheGate(t)
			rev := jsonpath(t, "{.status.canary.canaryRevision}", "-n", appNS, "webapp/cny")
			// (A value acts once: the second promotion of the same revision says when, as kubectl webapp promote does.)
			kubectl(t, "annotate", "--overwrite", "-n", appNS, "webapp/cny", "webapp.example.com/action=promote "+rev+"/0 at "+time.Now().UTC().Format(time.RFC3339Nano))
			var previous string
			eventually(t, 3*time.Minute, "promoted, the version before kept warm at 4 ready pods", func() error {
				st := jsonpath(t, "{.status.canary.phase}/{.status.canary.previousRevision}", "-n", appNS, "webapp/cny")
				kept, err := kubectlErr("get", "-n", appNS, "deployment/cny-canary", "-o", `jsonpath={.metadata.annotations.webapp\.example\.com/revision}/{.status.availableReplicas}/{.status.updatedReplicas}`)
				if err != nil {
					return fmt.Errorf("status.canary %s, cny-canary: %w", st, err)
				}
				phase, prev, _ := strings.Cut(st, "/")
				if phase != "Stable" || prev == "" || kept != prev+"/4/4" {
					return fmt.Errorf("status.canary %s, cny-canary %s", st, kept)
				}
				previous = prev
				return nil
			})
			return previous
		}
		previous := promotedKeepingWarm()
		if canary, _, _ := tally(traefik, "", 20); canary != 0 {
			t.Errorf("%d of 20 requests answered by the pods kept warm: they must get none of the traffic", canary)
		}
		load := record(traefik)
		start := time.Now()
		time.Sleep(2 * time.Second)
		reverted := time.Now()
		apply(t, warm("g"))
		var back time.Time
		eventually(t, time.Minute, "every request answered by the pods kept warm", func() error {
			if canary, _, _ := tally(traefik, "", 1); canary != 1 {
				return errors.New("answered by the version set back from")
			}
			back = time.Now()
			return nil
		})
		if st := jsonpath(t, "{.status.canary.phase}/{.status.canary.canaryRevision}/{.status.canary.reason}", "-n", appNS, "webapp/cny"); st != "Promoting/"+previous+"/RolledBackToPrevious" && !strings.HasPrefix(st, "Stable/") {
			t.Errorf("status.canary on the way back: %s, want Promoting/%s/RolledBackToPrevious", st, previous)
		}
		eventually(t, 3*time.Minute, "the Deployment rolled back, the pods kept warm gone", func() error {
			if st := jsonpath(t, "{.status.canary.phase}/{.status.canary.stableRevision}", "-n", appNS, "webapp/cny"); st != "Stable/"+previous {
				return fmt.Errorf("status.canary %s", st)
			}
			return goneFromApps("deployment/cny-canary")
		})
		done := time.Now()
		time.Sleep(3 * time.Second)
		load.end()
		n, warmAnswered, failed := load.between(start, time.Now())
		after, afterWarm, _ := load.between(done, time.Now())
		fmt.Printf("realnode: warm rollback: every request on the version kept warm %.1fs after the spec was set back; the Deployment rolled back behind the route and the pods kept warm gone %.0fs after it; %d of %d requests answered by them; %d of %d requests failed (%s); %d of %d answered by them once gone\n",
			back.Sub(reverted).Seconds(), done.Sub(reverted).Seconds(), warmAnswered, n, failed, n, load.failed(), afterWarm, after)
		if failed != 0 || warmAnswered == 0 || afterWarm != 0 {
			t.Errorf("the way back: %d of %d failed (%s), %d answered by the pods kept warm, %d of %d after they went: want none failed, some, none", failed, n, load.failed(), warmAnswered, afterWarm, after)
		}
		if back.Sub(reverted) > 10*time.Second {
			t.Errorf("the traffic reached the pods kept warm %s after the apply", back.Sub(reverted))
		}

		// The floor, in the same run: the same revert after the same promotion, without the pods kept warm (the
		// field taken out with it), is the rollback window's way back, the Deployment's rolling update.
		warmTook := back.Sub(reverted)
		if prev := promotedKeepingWarm(); prev != previous {
			t.Fatalf("the version before is %s, want %s", prev, previous)
		}
		load = record(traefik)
		start = time.Now()
		time.Sleep(2 * time.Second)
		reverted = time.Now()
		apply(t, blueGreen("g", 0)+"      rollbackWindowSeconds: 600\n")
		var rolled time.Time
		eventually(t, 3*time.Minute, "the Deployment rolled back to the version before", func() error {
			st, err := kubectlErr("get", "-n", appNS, "deployment/cny", "-o", `jsonpath={.metadata.annotations.webapp\.example\.com/revision}/{.status.observedGeneration}/{.metadata.generation}/{.status.replicas}/{.status.updatedReplicas}/{.status.availableReplicas}`)
			if err != nil {
				return err
			}
			parts := strings.Split(st, "/")
			if len(parts) != 6 || parts[0] != previous || parts[1] != parts[2] || parts[3] != "4" || parts[4] != "4" || parts[5] != "4" {
				return fmt.Errorf("cny: revision/observedGeneration/generation/replicas/updated/available %s", st)
			}
			rolled = time.Now()
			return nil
		})
		time.Sleep(3 * time.Second)
		load.end()
		coldN, _, coldFailed := load.between(start, time.Now())
		cold := rolled.Sub(reverted)
		fmt.Printf("realnode: warm rollback: the same revert without the pods kept warm: every pod of the version before only %.1fs after the apply (the Deployment's rolling update; %.0f times as long as with them); %d of %d requests failed (%s)\n",
			cold.Seconds(), cold.Seconds()/max(warmTook.Seconds(), 0.1), coldFailed, coldN, load.failed())
		if coldFailed != 0 {
			t.Errorf("the revert without the pods kept warm: %d of %d requests failed (%s)", coldFailed, coldN, load.failed())
		}
		if warmTook >= cold {
			t.Errorf("the way back to the pods kept warm took %s, no sooner than the rolling update's %s", warmTook, cold)
		}
	})

	t.Run("a mirror Traefik's class does not list is rolled back before the route gets it", func(t *testing.T) {
		load := record(traefik)
		start := time.Now()
		apply(t, withSteps("webapp-test/webserver:2", "    env: [{name: AB, value: c}]\n", "", "[{weight: 0, mirrorPercent: 50, pauseSeconds: 10}]"))
		eventually(t, 3*time.Minute, "rolled back", func() error {
			if st := jsonpath(t, "{.status.canary.phase}: {.status.canary.reason}", "-n", appNS, "webapp/cny"); st != "RolledBack: GatewayUnsupported" {
				return fmt.Errorf("status.canary %s", st)
			}
			return nil
		})
		time.Sleep(3 * time.Second)
		load.end()
		n, _, failed := load.between(start, time.Now())
		msg := jsonpath(t, "{.status.canary.message}", "-n", appNS, "webapp/cny")
		fmt.Printf("realnode: canary: a mirror on Traefik rolled back in %.1fs (%s); %d of %d requests failed\n", time.Since(start).Seconds(), msg, failed, n)
		if !strings.Contains(msg, "does not list HTTPRouteRequestMirror") || failed != 0 {
			t.Errorf("rolled back saying %q with %d of %d requests failed (%s): want the class's missing HTTPRouteRequestMirror named, none failed", msg, failed, n, load.failed())
		}
		if f := jsonpath(t, "{.spec.rules[*].filters}", "-n", appNS, "httproute/cny"); f != "" {
			t.Errorf("the route has filters: %s", f)
		}
	})

	t.Run("a blue/green without a Gateway, previewed at a quarter, switches the Service's selector once scaled up, no request failed", func(t *testing.T) {
		// The same WebApp, exposed through Traefik's Ingress instead of the Gateway: the clients go to its Service's
		// cluster IP through kube-proxy, and the Service's selector is the switch. A new version (AB=s) is previewed
		// at a quarter of the stable count (previewPercent: one pod of four) behind its own Service and, through a
		// second Ingress, at its preview host; held at the gate.
		const previewHost = "cny-preview-ingress.shop.test"
		apply(t, webAppV2(appNS, "cny", "webapp-test/webserver:2", 4, `  container:
    healthCheckPath: /healthz
    drainSeconds: 10
    env: [{name: AB, value: s}]
  expose: {hosts: [cny.shop.test], ingress: {className: traefik}}
  rollout:
    canary:
      blueGreen: {gate: {}, keepSeconds: 10, previewHost: `+previewHost+`, previewPercent: 25}
`))
		eventually(t, time.Minute, "the route gone", func() error { return goneFromApps("httproute/cny") })
		heldAtTheGate(t)
		if pods := jsonpath(t, "{.spec.replicas}/{.status.availableReplicas}", "-n", appNS, "deployment/cny-canary"); pods != "1/1" {
			t.Errorf("the preview's pods (wanted/available) %s, want 1/1: a quarter of four", pods)
		}
		// The preview host through Traefik's Ingress (it learns a new Ingress, and its endpoints, within moments).
		eventually(t, 30*time.Second, "the preview host answered by the new version through the Ingress", func() error {
			if canary, _, words := tallyHost(traefik, previewHost, "", 1); canary != 1 {
				return fmt.Errorf("not answered by the new version: %s", words)
			}
			return nil
		})
		hostPreviewed, hostFailed, hostWords := tallyHost(traefik, previewHost, "", 100)
		hostProduction, hostProductionFailed, _ := tallyHost(traefik, cnyHost, "", 100)
		fmt.Printf("realnode: blue/green through the Service: %d of 100 requests to the preview host through Traefik's Ingress answered by the new version (%d failed); %d of 100 to cny.shop.test through it (%d failed)\n",
			hostPreviewed, hostFailed, hostProduction, hostProductionFailed)
		if hostPreviewed != 100 || hostFailed != 0 || hostProduction != 0 || hostProductionFailed != 0 {
			t.Errorf("the preview host through the Ingress: %d of 100 by the new version (%d failed: %s), %d of 100 production requests by it (%d failed): want 100, 0, 0, 0",
				hostPreviewed, hostFailed, hostWords, hostProduction, hostProductionFailed)
		}
		service := "http://" + jsonpath(t, "{.spec.clusterIP}", "-n", appNS, "service/cny") + ":8080/"
		previewService := "http://" + jsonpath(t, "{.spec.clusterIP}", "-n", appNS, "service/cny-canary") + ":8080/"
		load := record(service)
		start := time.Now()
		// (A Service just created: its endpoints reach kube-proxy a moment after the pods are ready.)
		eventually(t, 30*time.Second, "Service cny-canary answered by the new version", func() error {
			if canary, _, words := tally(previewService, "", 1); canary != 1 {
				return fmt.Errorf("not answered by the new version: %s", words)
			}
			return nil
		})
		previewed, failedPreview, previewWords := tally(previewService, "", 100)
		eventually(t, time.Minute, "200 production requests answered", func() error {
			if n, _, _ := load.between(start, time.Now()); n < 200 {
				return fmt.Errorf("%d answered", n)
			}
			return nil
		})
		n, canary, failed := load.between(start, time.Now())
		fmt.Printf("realnode: blue/green through the Service: %d of 100 requests to Service cny-canary answered by the new version (%d failed); %d of %d production requests answered by it (%d failed)\n",
			previewed, failedPreview, canary, n, failed)
		if previewed != 100 || failedPreview != 0 || canary != 0 {
			t.Errorf("the preview: %d of 100 at Service cny-canary by the new version (%d failed: %s), %d of %d production requests by it: want 100, 0, 0",
				previewed, failedPreview, previewWords, canary, n)
		}
		// A person promotes it: the new version is scaled to four pods, and once all four are ready the Service's
		// selector moves to them, and kube-proxy follows.
		rev := jsonpath(t, "{.status.canary.canaryRevision}", "-n", appNS, "webapp/cny")
		promoted := time.Now()
		kubectl(t, "annotate", "--overwrite", "-n", appNS, "webapp/cny", "webapp.example.com/action=promote "+rev+"/0")
		var scaled, switched time.Time
		var early int // production requests the new version answered before its four pods were ready
		eventually(t, 2*time.Minute, "every production request answered by the new version", func() error {
			allReady := func() bool {
				return jsonpath(t, "{.status.readyReplicas}", "-n", appNS, "deployment/cny-canary") == "4"
			}
			ready := allReady()
			if ready && scaled.IsZero() {
				scaled = time.Now()
			}
			canary, _, _ := tally(service, "", 5)
			if !ready && !allReady() {
				// Not all four ready before the requests, nor after them: none may have gone to the new version.
				early += canary
			}
			if canary != 5 {
				return errors.New("answered by the version before")
			}
			switched = time.Now()
			return nil
		})
		if early != 0 {
			t.Errorf("%d production requests answered by the new version before its four pods were ready", early)
		}
		selector := jsonpath(t, "{.spec.selector}", "-n", appNS, "service/cny")
		keepFrom := switched.Add(time.Second)
		time.Sleep(6 * time.Second)
		kn, kcanary, _ := load.between(keepFrom, time.Now())
		eventually(t, 3*time.Minute, "promoted, the Service back on the stable pods", func() error {
			if phase := jsonpath(t, "{.status.canary.phase}", "-n", appNS, "webapp/cny"); phase != "Stable" {
				return fmt.Errorf("status.canary.phase %s", phase)
			}
			if err := goneFromApps("ingress/cny-canary"); err != nil {
				return err
			}
			return goneFromApps("deployment/cny-canary")
		})
		done := time.Since(promoted)
		time.Sleep(3 * time.Second)
		load.end()
		total, _, failedTotal := load.between(start, time.Now())
		after := jsonpath(t, "{.spec.selector}", "-n", appNS, "service/cny")
		fmt.Printf("realnode: blue/green through the Service: scaled up from the quarter preview (four pods ready) %.1fs after the promotion, every request answered by the new version %.1fs after it (selector %s); in the keep %d of %d by it; promoted and the selector back (%s) %.0fs after; %d of %d requests failed throughout (%s)\n",
			scaled.Sub(promoted).Seconds(), switched.Sub(promoted).Seconds(), selector, kcanary, kn, after, done.Seconds(), failedTotal, total, load.failed())
		if !strings.Contains(selector, "canary-of") || strings.Contains(after, "canary-of") {
			t.Errorf("the Service's selector at the switch %s, after the promotion %s: want the canary's, then the stable pods'", selector, after)
		}
		if kcanary != kn || kn < 50 || failedTotal != 0 {
			t.Errorf("the keep: %d of %d by the new version; %d of %d failed throughout (%s): want all (at least 50), none", kcanary, kn, failedTotal, total, load.failed())
		}
		if switched.Sub(scaled) > 15*time.Second {
			t.Errorf("the switch took %s after the new version's four pods were ready", switched.Sub(scaled))
		}
	})
}

// goneFromApps is nil once the object what (kind/name) of the apps' namespace is gone.
func goneFromApps(what string) error {
	out, err := kubectlErr("get", "-n", appNS, what, "--ignore-not-found", "-o", "name")
	if err == nil && strings.TrimSpace(out) != "" {
		err = fmt.Errorf("still there: %s", out)
	}
	return err
}

// tally sends n requests through url naming cnyHost, each on a new connection, with header X-Canary: value, and counts
// the answers of the canary's pods and the failed requests (the first three failures' words).
func tally(url, value string, n int) (canary, failed int, words string) {
	return tallyHost(url, cnyHost, value, n)
}

// tallyHost is tally naming host.
func tallyHost(url, host, value string, n int) (canary, failed int, words string) {
	var fails []string
	for range n {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return 0, n, err.Error()
		}
		req.Host = host
		req.Header.Set("X-Canary", value)
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		var rep reply
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&rep)
			_ = resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		switch {
		case err != nil:
			failed++
			if len(fails) < 3 {
				fails = append(fails, err.Error())
			}
		case strings.HasPrefix(rep.Hostname, "cny-canary-"):
			canary++
		}
	}
	return canary, failed, strings.Join(fails, "; ")
}
