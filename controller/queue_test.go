package controller

import (
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestUnobservedFirst adds requests as controller-runtime's handlers and the controller do, and checks the order and
// priority they come out with: a WebApp whose status does not observe its generation first, whatever it was added
// with (and never lowered); the others as added.
func TestUnobservedFirst(t *testing.T) {
	unobserved := map[string]bool{"new": true, "changed": true}
	q := newQueue(logr.Discard(), func(key types.NamespacedName) bool { return unobserved[key.Name] })(
		"test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	pq := q.(priorityqueue.PriorityQueue[reconcile.Request])
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	low, high := handler.LowPriority, 200
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, req("listed"), req("new")) // the initial list
	q.Add(req("child-event"))                                                        // a child's change
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, req("changed"))
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, req("urgent"))
	want := []struct {
		name     string
		priority int
	}{{"urgent", 200}, {"new", PriorityUnobserved}, {"changed", PriorityUnobserved}, {"child-event", 0}, {"listed", low}}
	for _, w := range want {
		got, priority, _ := pq.GetWithPriority()
		if got.Name != w.name || priority != w.priority {
			t.Fatalf("got %s at priority %d, want %s at %d", got.Name, priority, w.name, w.priority)
		}
		q.Done(got)
	}
	// Taken at PriorityUnobserved and added back by the controller at that priority once its status observes its
	// spec, a WebApp goes at the default priority again.
	delete(unobserved, "new")
	raised := PriorityUnobserved
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: &raised}, req("new"))
	if got, priority, _ := pq.GetWithPriority(); got.Name != "new" || priority != 0 {
		t.Fatalf("got %s at priority %d, want new at 0", got.Name, priority)
	}
}
