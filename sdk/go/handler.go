package orchard

// ResourceHandler is one optional sub-resource of an external resource (a policy, a
// permission...), for Ensure inside a reconciler: not required -> delete it if present;
// required -> create it, or bring it up to date. C is its current state.
type ResourceHandler[C any] interface {
	// Name is shown in messages, e.g. "policy".
	Name() string
	// IsRequired says whether the sub-resource should exist.
	IsRequired() bool
	// Current is the current state; nil when it does not exist.
	Current() (*C, error)
	// Create creates it.
	Create() error
	// Update brings it to the desired state and says whether anything changed.
	Update(current *C) (bool, error)
	// Delete deletes it; MUST succeed when it is already gone.
	Delete(current *C) error
}

// Ensure drives a handler: NeedsRefresh when anything changed (the host fetches the resource
// again), done when it was already as desired, a failed status when a step failed.
func Ensure[C any](h ResourceHandler[C]) Status {
	current, err := h.Current()
	if err != nil {
		return Failed(err)
	}
	what := ""
	switch required := h.IsRequired(); {
	case !required && current != nil:
		err, what = h.Delete(current), "deleted"
	case required && current == nil:
		err, what = h.Create(), "created"
	case required && current != nil:
		var changed bool
		if changed, err = h.Update(current); changed {
			what = "updated"
		}
	}
	if err != nil {
		return Failed(err)
	}
	if what == "" {
		return Done()
	}
	return NeedsRefreshStatus(h.Name() + " " + what)
}
