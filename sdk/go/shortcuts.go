package orchard

// Shortcuts (orchard:shortcuts, docs/concepts.md "Shortcuts"): what the plugin's external
// system guarantees, so that the host skips calls its generic flow makes to stay leak-safe on
// any system. Every Go component exports the interface: an actuator that does not implement
// ShortcutDeclarer declares none and gets the generic flow.

// Shortcuts is what an external system guarantees. Declare only what the system itself
// enforces (its API documents it): the conformance kit checks both against the real system.
type Shortcuts struct {
	// CreateRefusesDuplicates: the system refuses to create a resource whose identifying
	// fields (those ListForAdoption matches on) an existing one has — Create then returns a
	// failure and changes nothing. The host skips ListForAdoption before a create and calls
	// it only after a create that failed; ListForAdoption MUST apply (not answer "does not
	// apply") to every object the plugin can create. (PowerDNS answers 409 Conflict for a
	// TSIG key or zone name that exists.)
	CreateRefusesDuplicates bool
	// DeleteIsSynchronous: a Delete that returns done has removed the resource (GetByID
	// answers nil from then on): the host releases the object without reading it back.
	DeleteIsSynchronous bool
	// DeleteByID: deleting needs only the resource's id, and a delete of an id whose resource
	// is gone returns done: the host deletes an object by its status.id without reading the
	// resource first, through IDDeleter, which the actuator MUST implement. (PowerDNS deletes
	// a TSIG key by its name, and answers 404 for one that is gone.)
	DeleteByID bool
}

// IDDeleter is what an actuator that declares DeleteByID implements: the delete of the
// resource with this id, which nobody read first; done when no resource has it. The SDK
// calls it instead of Delete when the host deletes by id (Delete still gets a resource found
// by adoption, so it may just call DeleteByID with res.ID).
type IDDeleter[S any] interface {
	DeleteByID(obj *Object[S], id string) (Status, error)
}

// ShortcutDeclarer is what an actuator implements, beside Actuator, to declare Shortcuts.
// The SDK detects it on the value given to Export (or NewRaw); mind the receiver, as for
// Versioned. Shortcuts MUST be pure (same answer every time, no I/O).
type ShortcutDeclarer interface {
	Shortcuts() Shortcuts
}

// shortcutsOf is what a declares: none unless it implements ShortcutDeclarer.
func shortcutsOf(a any) Shortcuts {
	if d, ok := a.(ShortcutDeclarer); ok {
		return d.Shortcuts()
	}
	return Shortcuts{}
}
