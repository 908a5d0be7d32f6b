package orchard

import "errors"

func asFailure(err error, f **Failure) bool { return errors.As(err, f) }
func asPending(err error, p **Pending) bool { return errors.As(err, p) }
