"""The vectorized engine: many runs of a scenario at once, in NumPy, without SimPy.

It runs a variant only by declaration (``engine="auto"`` checks them, :func:`.capability.unavailable`): the
protocol kind declares a kernel this engine has (exact conjugate G-FVL: ``conjugate-first-visits``,
the state changes only at a node's first visit, or at its first visit after an unlearning request;
natural-gradient G-FVL and the particle protocols: ``batched-steps``, every run's holder stepped at
once, in :mod:`gossipsim.execution.vectorized.steps`), the scheduler kind declares ``batched-step`` (its batched
sampler moves walks exactly as its one-step sampler does), the channel declares
``homogeneous-delay`` on the walk (a hop's delay does not depend on the link and nothing is lost)
or ``homogeneous-server-links`` with the parameter server (every agent's downlink alike, every
uplink alike, nothing lost), and requests arrive at iterations (not at simulated times). Anything
without a declaration runs on the event engine.

Both architectures run here. With ``protocol.architecture = "server"`` the scheduler picks the agent
of each slot exactly as it picks the walk's next holder, and the agent's work is the walk holder's
(:class:`~gossipsim.protocols.server.ServerRounds` calls the wrapped protocol's ``on_token``), so the
kernels step the scheduled agents as they step holders; only what a slot costs differs
(:func:`~gossipsim.world.world.slot_costs`): the walk pays a hop when the token moves, the server a round
every slot, a download of the state then an upload of the message, both counted. Then

1. each run's seed, start node and walk stream are NumPy's own SeedSequence / PCG64 objects, built
   run by run as the event engine builds them (:mod:`gossipsim.core.streams`);
2. the walks of a batch of runs advance together, one vectorised step per slot, each run reading
   *its own* stream's uniforms in the same blocks, in the same order, as the event engine's
   :class:`~gossipsim.scheduling.Walker`, so each run realises exactly the same walk;
3. with exact factors every state follows from the first-visit slots: without requests (the
   prior plus the factors visited) and with requests at iterations (a node's factor leaves at its
   first visit after its request; the retrain baseline restarts at each request and adds the first
   visits since), so the traces and every metric are computed across the batch
   (:func:`~gossipsim.measurement.batch.measure_batch`, the same definitions as
   :func:`~gossipsim.measurement.measure.measure`). Otherwise (extra evaluation columns, a settling window)
   the protocol is called only at the slots where it can change state (first visits, first
   visits after each request, request slots), which is all the event engine's calls amount to,
   and each run is measured by the event engine's own code. Either way a batch gives one
   :class:`~gossipsim.measurement.outputs.BatchOutput`, committed to a results folder as one part;
4. slot times are cumulative sums of the same increments in the same order (compute, the server's
   round, the hop: :func:`~gossipsim.engine.slottables.stepped_clock`), payload bits the same whole
   numbers.

The two engines therefore give byte-identical tables (tested); the vectorised one is about 12-15x
faster on the paper's Fig. 3 scenario (``benchmarks/engines.py``).

**Drawn stays** (``[scheduler] stays = "drawn"``; :func:`.driver.simulate_runs`). A walk that mostly waits (a
Metropolis–Hastings leaf of a star keeps the token with probability 1 − 1/(K − 1)) is stepped slot
by slot above. Where the protocol kind declares that a repeated visit changes nothing
(:meth:`~gossipsim.protocols.ProtocolKind.idle_stays`) and the scheduler that its jump chain is its
law (:attr:`~gossipsim.scheduling.Scheduler.stay_kernel`), :mod:`gossipsim.execution.vectorized.stays` draws
each stay's length at once (geometric) and the next holder from the jump chain, from each run's own
walk stream, keeping first visits, first visits since each request, the slots each node held the
token and the stays holding a recorded or requested slot: memory bounded by runs × moves, not runs
× slots. The walks are read through a :class:`~gossipsim.engine.slottables.SlotTable`, so states, traces
and metrics are computed by the same code as for stepped walks (:func:`.first_visits.learning_batch`,
:func:`.first_visits.unlearning_batch`, :func:`~gossipsim.measurement.batch.measure_batch`), with the same meaning of
every number; the tables agree with the stepped walks' in distribution, not in value (tested
against the exact cover and hitting times). ``scenarios/cover_time_vs_nodes.toml``: 275 s stepped,
about 26 s drawn, as a whole command on two cores (``benchmarks/stays.py``).
"""
