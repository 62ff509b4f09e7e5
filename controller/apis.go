package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// servedAPIsRecheck is how often the API server's discovery is asked again for a kind of child it did not serve.
const servedAPIsRecheck = 10 * time.Second

// servedAPIs tracks which kinds of child declared whereServed the API server serves (HTTPRoute: only where the
// Gateway API's CRDs are installed). A kind not served is neither watched nor written, and a WebApp that asks for
// one says so in its status; the operator never fails to start for it. Until every such kind is served, discovery
// is asked again every servedAPIsRecheck, and a kind that appears is watched from then on (onServed), with no
// restart.
type servedAPIs struct {
	disc     discovery.DiscoveryInterface
	onServed func(ctx context.Context, c childKind) error

	mu     sync.RWMutex
	served map[string]bool // by kind
}

// isServed: the kind can be written (always, for a kind not declared whereServed).
func (s *servedAPIs) isServed(c childKind) bool {
	if s == nil || !c.ifServed {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.served[c.kind]
}

// check asks discovery about every kind not known to be served yet; for each that is now, it runs onServed, then
// counts it served. It reports whether every kind is served.
func (s *servedAPIs) check(ctx context.Context) bool {
	all := true
	for _, c := range children {
		if !c.ifServed || s.isServed(c) {
			continue
		}
		if !s.serves(c) {
			all = false
			continue
		}
		// Served first, so what onServed starts (a resync) counts the kind in.
		s.mu.Lock()
		s.served[c.kind] = true
		s.mu.Unlock()
		if s.onServed != nil {
			if err := s.onServed(ctx, c); err != nil {
				log.FromContext(ctx).Error(err, "watching a kind the API server now serves", "kind", c.kind)
				s.mu.Lock()
				delete(s.served, c.kind)
				s.mu.Unlock()
				all = false
				continue
			}
		}
		log.FromContext(ctx).Info("the API server serves this kind of child: watching and writing it", "kind", c.kind, "apiVersion", c.apiVersion)
	}
	return all
}

// serves asks discovery whether c's group and version have c's kind.
func (s *servedAPIs) serves(c childKind) bool {
	list, err := s.disc.ServerResourcesForGroupVersion(c.apiVersion)
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		// (A subresource, httproutes/status, names its parent's kind too.)
		if r.Kind == c.kind && !strings.Contains(r.Name, "/") {
			return true
		}
	}
	return false
}

// Start asks again every servedAPIsRecheck until every kind is served (a manager.Runnable, leader only like the
// controller whose watches it adds).
func (s *servedAPIs) Start(ctx context.Context) error {
	// Polled until every kind is served, or the manager stops (not an error).
	_ = wait.PollUntilContextCancel(ctx, servedAPIsRecheck, true, func(ctx context.Context) (bool, error) {
		return s.check(ctx), nil
	})
	return nil
}
