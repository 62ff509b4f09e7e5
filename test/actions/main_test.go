// Package actions drives random sequences of what other actors do (users deleting and re-creating children,
// another field manager applying, spec changes, deletions under both policies, foreign objects, API errors,
// restarts of the operator) against the operator running in-process on a whole local cluster (garbage collector,
// Deployment controller, scheduler and a kwok node), and checks its invariants after every step and at rest.
package actions

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/test/cluster"
	operatorpkg "github.com/example/webapp-operator/test/operator"
)

var (
	lc      *cluster.Cluster
	k8s     client.Client     // the test's own client (admin; its requests are not counted)
	dyn     dynamic.Interface // the same, for unstructured applies and watches
	workDir string            // kubeconfig, component logs, operator log
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	workDir, err = os.MkdirTemp("", "webapp-actions-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logFile, err := os.Create(filepath.Join(workDir, "operator.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.UseDevMode(true), zap.Level(zapcore.Level(-1))))
	lc, err = cluster.Start(context.Background(), cluster.Options{Dir: workDir, DieWithParent: true, InstallCRD: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local cluster: %v\n", err)
		return 1
	}
	code := setUpAndRun(m)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "action tests failed; operator and cluster logs are in %s\n", workDir)
	}
	if err := lc.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the local cluster: %v\n", err)
	}
	return code
}

// setUpAndRun builds the test's clients and runs the tests.
func setUpAndRun(m *testing.M) int {
	var err error
	if k8s, err = client.New(lc.Config, client.Options{Scheme: controller.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if dyn, err = dynamic.NewForConfig(lc.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// writeLog records the write requests (anything but GET and HEAD) the operator's clients send, across restarts.
type writeLog struct {
	mu   sync.Mutex
	seen []string
	at   []time.Time
}

// take returns the writes seen so far and forgets them.
func (w *writeLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen
	w.seen, w.at = nil, nil
	return s
}

// last returns the last n writes seen with their times, without forgetting them.
func (w *writeLog) last(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i := max(0, len(w.seen)-n); i < len(w.seen); i++ {
		out = append(out, w.at[i].Format("15:04:05.000")+" "+w.seen[i])
	}
	return out
}

func (w *writeLog) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, s)
	w.at = append(w.at, time.Now())
}

// fault is an API error the operator's requests get instead of the server's answer.
type fault struct {
	method   string // PATCH
	resource string // "deployments", "services"
	code     int    // 403, 503
	reason   metav1.StatusReason
	message  string
}

func (f *fault) String() string {
	return fmt.Sprintf("%s of %s answered %d %s %q", f.method, f.resource, f.code, f.reason, f.message)
}

// answer is f's response to req, or nil when f does not apply to req.
func (f *fault) answer(req *http.Request) *http.Response {
	if req.Method != f.method || !strings.Contains(req.URL.Path, "/"+f.resource+"/") {
		return nil
	}
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`,
		f.message, f.reason, f.code)
	return &http.Response{StatusCode: f.code, Status: fmt.Sprintf("%d %s", f.code, http.StatusText(f.code)),
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}
}

// operator is a running manager with the WebApp controller for one namespace, as main.go builds it.
type operator struct {
	stop func() // stops the manager and waits for it; idempotent
}

// startOperator runs the operator's manager for namespace ns, resyncing every requeue. Its write requests go to
// writes; while faults holds a fault, the requests it applies to get the fault's answer instead.
func startOperator(t *testing.T, ns string, requeue time.Duration, writes *writeLog, faults *atomic.Pointer[fault]) *operator {
	t.Helper()
	c := rest.CopyConfig(lc.Config)
	c.QPS, c.Burst = 200, 400
	return &operator{stop: operatorpkg.Run(t, c, operatorpkg.Options{Namespace: ns, Requeue: requeue, Workers: 4,
		Wrap: func(next http.RoundTripper) http.RoundTripper {
			return operatorpkg.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if f := faults.Load(); f != nil {
					if resp := f.answer(req); resp != nil {
						return resp, nil
					}
				}
				if req.Method != http.MethodGet && req.Method != http.MethodHead {
					writes.add(req.Method + " " + req.URL.Path)
				}
				return next.RoundTrip(req)
			})
		}})}
}

// waitResyncs waits until the resync loops of this process have walked the cached WebApps n more times (see
// operator.WaitResyncs), allowing n+1 periods and 30 s.
func waitResyncs(t testing.TB, n int, period time.Duration) {
	t.Helper()
	operatorpkg.WaitResyncs(t, n, time.Duration(n+1)*period+30*time.Second)
}
