package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// gatewayGroup is the Gateway API's group; its kinds are served only where its CRDs are installed.
const gatewayGroup = "gateway.networking.k8s.io"

// servedAPIsRecheck is the discovery period: how often the API server's discovery is asked whether it serves each
// kind of child declared whereServed, in both directions (a CRD installed, a CRD deleted).
const servedAPIsRecheck = 10 * time.Second

// goneRecheckEvery is the least time between two discovery checks asked for by failed writes (recheck): every
// WebApp that needs a kind whose API went away fails the same way at once, and one answer serves them all.
const goneRecheckEvery = time.Second

// servedAPIs tracks which kinds of child declared whereServed the API server serves (HTTPRoute: only where the
// Gateway API's CRDs are installed). An optional API that comes and goes is a state, not an error: a kind not
// served is neither watched nor written, and a WebApp that asks for one says so in its status; the operator never
// fails to start for it. Discovery is asked every servedAPIsRecheck for as long as the manager runs. A kind that
// appears is watched from then on (onServed); one that disappears is unwatched (onGone: its informer stopped, so no
// reflector retries against a missing resource), and either change has every WebApp looked at again (changed),
// with no restart. A write of the kind that fails as a missing API would asks discovery at once (recheck).
type servedAPIs struct {
	disc discovery.DiscoveryInterface
	// onServed starts watching a kind the API server now serves; onGone stops watching one it no longer serves.
	onServed, onGone func(ctx context.Context, c childKind) error
	// changed runs after a check that changed what is served (the WebApps are looked at again).
	changed func(ctx context.Context)

	mu     sync.RWMutex
	served map[string]bool      // by kind
	going  map[string]time.Time // kinds whose CRD terminates (discovery lists them until it is gone), since when

	// kick wakes Start for a check at once (a kind began to go).
	kick chan struct{}
	// checking makes checks one at a time; lastCheck is when the last one ended.
	checking  sync.Mutex
	lastCheck time.Time
}

// isServed: the kind can be written (always, for a kind not declared whereServed).
func (s *servedAPIs) isServed(c childKind) bool {
	if s == nil || !c.ifServed {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, going := s.going[c.kind]
	return s.served[c.kind] && !going
}

func (s *servedAPIs) set(kind string, served bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[kind] = served
	delete(s.going, kind)
}

// goingFor is how long a kind stays marked as going while discovery still lists it: a CRD deleted and created
// again before a check saw it gone is written again after that.
const goingFor = 30 * time.Second

// goingRecheck is the discovery period while a kind is going: its informer is stopped as soon as it is gone.
const goingRecheck = time.Second

// markGoing counts c as unserved from now on, while its CRD terminates, and reports whether it was not already.
func (s *servedAPIs) markGoing(c childKind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.going[c.kind]; ok || !s.served[c.kind] {
		return false
	}
	if s.going == nil {
		s.going = map[string]time.Time{}
	}
	s.going[c.kind] = time.Now()
	return true
}

// anyGoing: some kind's CRD terminates.
func (s *servedAPIs) anyGoing() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.going) > 0
}

// check asks discovery about every kind declared whereServed and follows what changed: a kind now served is
// watched (onServed) before it counts as served, so a reconcile that sees it served finds its informer; a kind no
// longer served stops counting as served before it is unwatched (onGone), so no reconcile reads it through a
// cache that no longer has its informer. A discovery answer other than "not found" changes nothing (a server that
// is briefly unavailable has not uninstalled anything).
func (s *servedAPIs) check(ctx context.Context) {
	s.checking.Lock()
	defer s.checking.Unlock()
	changed := false
	for _, c := range children {
		if !c.ifServed || c.isVariant() {
			// (A variant is of a kind checked once, by its own entry.)
			continue
		}
		s.mu.RLock()
		was, since := s.served[c.kind], s.going[c.kind]
		s.mu.RUnlock()
		now, known := s.serves(c)
		switch {
		case !known:
		case now && !was:
			if s.onServed != nil {
				if err := s.onServed(ctx, c); err != nil {
					log.FromContext(ctx).Error(err, "watching a kind the API server now serves", "kind", c.kind)
					continue
				}
			}
			s.set(c.kind, true)
			changed = true
			log.FromContext(ctx).Info("the API server serves this kind of child: watching and writing it", "kind", c.kind, "apiVersion", c.apiVersion)
		case now && !since.IsZero() && time.Since(since) >= goingFor:
			// Listed for longer than a deletion takes: a CRD deleted and created again before a check saw it gone.
			s.set(c.kind, true)
			changed = true
			log.FromContext(ctx).Info("a kind of child whose CRD was being deleted is served again", "kind", c.kind)
		case !now && was:
			s.set(c.kind, false)
			if s.onGone != nil {
				if err := s.onGone(ctx, c); err != nil {
					log.FromContext(ctx).Error(err, "stopping the watch of a kind the API server no longer serves", "kind", c.kind)
				}
			}
			// A kind that was going already counted as unserved: nothing changes for the WebApps.
			changed = changed || since.IsZero()
			log.FromContext(ctx).Info("the API server no longer serves this kind of child: not watching or writing it until it does; the WebApps that need it say so", "kind", c.kind, "apiVersion", c.apiVersion)
		}
	}
	s.lastCheck = time.Now()
	if changed && s.changed != nil {
		s.changed(ctx)
	}
}

// serves asks discovery whether c's group and version have c's kind; known is false when discovery did not answer
// (an error other than "not found").
func (s *servedAPIs) serves(c childKind) (served, known bool) {
	list, err := s.disc.ServerResourcesForGroupVersion(c.apiVersion)
	switch {
	case apierrors.IsNotFound(err):
		return false, true
	case err != nil:
		return false, false
	}
	for _, r := range list.APIResources {
		// (A subresource, httproutes/status, names its parent's kind too.)
		if r.Kind == c.kind && !strings.Contains(r.Name, "/") {
			return true, true
		}
	}
	return false, true
}

// recheck is asked by a write of c that failed with err: when err is what a missing API answers (see
// missingAPI), discovery is asked at once (at most every goneRecheckEvery), and it reports whether c is now unserved.
// The write's failure is then no error of the WebApp's: it says GatewayAPINotInstalled, with no event.
func (s *servedAPIs) recheck(ctx context.Context, c childKind, err error) bool {
	if s == nil || !c.ifServed {
		return false
	}
	if crdTerminating(err) {
		// Discovery lists the kind until its CRD is gone: counted unserved from now, and checked every
		// goingRecheck until it is gone.
		s.countGoing(ctx, c, "the CRD of this kind of child is being deleted: not writing it")
		return true
	}
	if !missingAPI(err) {
		return false
	}
	s.checking.Lock()
	recent := time.Since(s.lastCheck) < goneRecheckEvery
	s.checking.Unlock()
	if !recent {
		s.check(ctx)
	}
	if s.isServed(c) {
		// The API server's handler for the kind is gone before its discovery says so (or a check just before
		// the removal still listed it): the write's answer is believed, the kind counted unserved and checked
		// every goingRecheck; listed for goingFor more, it counts as served again.
		s.countGoing(ctx, c, "a write of this kind of child found no API while discovery still lists it: not writing it")
	}
	return !s.isServed(c)
}

// countGoing marks c as going (markGoing) and, the first time, says why, wakes Start for checks every goingRecheck and
// has every WebApp looked at again.
func (s *servedAPIs) countGoing(ctx context.Context, c childKind, why string) {
	if !s.markGoing(c) {
		return
	}
	log.FromContext(ctx).Info(why, "kind", c.kind)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	if s.changed != nil {
		s.changed(ctx)
	}
}

// missingAPI: err is what a request for a kind may answer after its API is removed: no mapping for the kind, a 404
// for a request that is not a read of one object (an apply creates what is missing, so it is never the object), a
// 405 for a method the path no longer has, or the cache without the kind's informer. (A create refused while the
// CRD terminates is crdTerminating's.) Discovery then decides.
func missingAPI(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) ||
		errors.As(err, new(*cache.ErrResourceNotCached))
}

// crdTerminating: err is the API server's refusal to create an object of a custom resource whose CRD is being
// deleted (apiextensions-apiserver's words; no reason or cause marks it otherwise).
func crdTerminating(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "custom resource definition is terminating")
}

// Start asks discovery every servedAPIsRecheck (every goingRecheck while a kind's CRD terminates) until the
// manager stops (a manager.Runnable, leader only like the controller whose watches it adds and stops).
func (s *servedAPIs) Start(ctx context.Context) error {
	for {
		s.check(ctx)
		period := servedAPIsRecheck
		if s.anyGoing() {
			period = goingRecheck
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		case <-time.After(period):
		}
	}
}
