# SPDX-License-Identifier: MIT
# bash completion for zkelectctl. Installed as
# /usr/share/bash-completion/completions/zkelectctl (bash-completion loads it
# on first use); or source this file from ~/.bashrc.
#
# Partition names after -p/--partition come from the agent itself
# (`zkelectctl partitions --json`, asked for at most 2 s: the agent's view,
# not the cluster view, which needs -c, --cluster or --zookeeper); when it
# does not answer, nothing is offered.

# The partition names the agent knows, one a line. $1.. are the socket
# options seen on the command line, passed on to zkelectctl.
_zkelectctl_partitions()
{
	local out
	out=$(timeout 2 zkelectctl "$@" partitions --json 2>/dev/null) || return 0
	# Every "name": "..." member of the answer, whatever object holds it.
	printf '%s\n' "$out" | grep -o '"name"[[:space:]]*:[[:space:]]*"[^"]*"' |
	    sed 's/.*"\([^"]*\)"$/\1/'
}

_zkelectctl()
{
	local cur prev
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()

	local verbs="status is-leader wait resign drain undrain run members partitions lock elect"
	local i w verb= verbi=0 sock=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-s|--socket)
			sock=("$w" "${COMP_WORDS[i+1]}")
			((i++))
			continue ;;
		--socket=*)
			sock=("$w")
			continue ;;
		esac
		if [ -z "$verb" ] && [[ $w != -* ]]; then
			verb=$w
			verbi=$i
		fi
		# After `run ... --` (or lock's), the rest is the command to run.
		if { [ "$verb" = run ] || [ "$verb" = lock ]; } && [ "$w" = -- ]; then
			if declare -F _command_offset >/dev/null; then
				_command_offset $((i + 1))
			else
				COMPREPLY=($(compgen -c -- "$cur"))
			fi
			return 0
		fi
	done

	# Option arguments.
	case $prev in
	-s|--socket)
		COMPREPLY=($(compgen -f -- "$cur"))
		compopt -o filenames 2>/dev/null
		return 0 ;;
	-c|--config)
		if [ "$verb" = members ] || [ "$verb" = partitions ]; then
			COMPREPLY=($(compgen -f -- "$cur"))
			compopt -o filenames 2>/dev/null
			return 0
		fi ;;
	--timeout|--hold|--session-timeout|--tick-time|--zookeeper|--id)
		# A duration, servers, an id: nothing to offer but the form.
		return 0 ;;
	--log-level)
		COMPREPLY=($(compgen -W "debug info warn error" -- "$cur"))
		return 0 ;;
	-p|--partition)
		local IFS=$'\n'
		COMPREPLY=($(compgen -W "$(_zkelectctl_partitions "${sock[@]}")" -- "$cur"))
		return 0 ;;
	esac

	if [ -z "$verb" ]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-s --socket -h --help -V --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
		fi
		return 0
	fi

	local opts=
	case $verb in
	status)     opts="--json -p --partition" ;;
	is-leader)  opts="-q --quiet -p --partition" ;;
	wait)       opts="--leader --follower --change --timeout -p --partition" ;;
	resign)     opts="--hold -p --partition" ;;
	drain|undrain) opts= ;;
	run)        opts="-q --quiet -p --partition --" ;;
	members)    opts="-c --config --json --timeout --zookeeper" ;;
	lock)       opts="--zookeeper --id --session-timeout --tick-time --log-level -v --verbose --" ;;
	elect)      opts="--zookeeper --session-timeout --tick-time --log-level -v --verbose" ;;
	partitions) opts="--json --timeout -c --config --cluster --zookeeper" ;;
	*)          return 0 ;;
	esac
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	return 0
}
complete -F _zkelectctl zkelectctl
