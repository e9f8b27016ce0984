"""Scale-out: the members of a consumer group train ONE model by iterative parameter mixing.

In: the ``[mixing]`` settings, this member's learner and offsets (at the loop's hooks), the mix
topic. Out: deltas published to the mix topic (:mod:`.topic`), the group's mixed model and
offset frontier folded from that log alike on every member (:mod:`.log`), the member's side of
the protocol (:mod:`.member`) and the ``streammkl_mix_*`` metrics (:mod:`.metrics`).
"""
