"""What a protocol's recorded states are (natural parameters, particle sets), the targets and
divergences measured from them, and how a table names its divergence."""
