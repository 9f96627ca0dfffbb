#!/usr/bin/env perl
# A minimal implementation of ctxkit's conformance protocol, version 1, in Perl with core
# modules only, written from PROTOCOL.md: an example for authors in other languages, and a
# test that the document is enough. Its manager keeps the history in memory and, when the
# history does not fit the budget, drops the oldest whole units (a tool call with its results,
# or one message), keeping system messages and the newest user message. Tokens are estimated
# on the high side as bytes of JSON / 2 + 8. It emits no events.
#
#   ctxkit conformance --command "perl conformance/examples/minimal.pl"
#   perl conformance/examples/minimal.pl --self-test     # the digest test vectors
use strict;
use warnings;
use JSON::PP ();
use Digest::SHA qw(sha256_hex);
use Encode qw(encode_utf8);
use IO::Handle;

my $JSON = JSON::PP->new->utf8->allow_nonref;
my $CANONICAL = JSON::PP->new->utf8->canonical->allow_nonref;
my %ROLES = map { $_ => 1 } qw(system developer user assistant tool);

sub copy_of { my ($value) = @_; return $JSON->decode($JSON->encode($value)) }

sub digest {
    my ($history, $ignore) = @_;
    my @kept = map {
        my $m = $_;
        ref $m eq 'HASH' ? { map { $ignore->{$_} ? () : ($_ => $m->{$_}) } keys %$m } : $m
    } @$history;
    return sha256_hex($CANONICAL->encode(\@kept));
}

sub edit_in_place {    # PROTOCOL.md, edit_after
    my ($value) = @_;
    if (ref $value eq 'ARRAY') {
        edit_in_place($_) for @$value;
        push @$value, { role => 'user', content => 'EDITED BY CALLER' };
    } elsif (ref $value eq 'HASH') {
        for my $key (keys %$value) {
            if (defined $value->{$key} && !ref $value->{$key}) {
                $value->{$key} .= ' EDITED' unless JSON::PP::is_bool($value->{$key})
                    || $value->{$key} =~ /^-?\d+(\.\d+)?$/;
            } else {
                edit_in_place($value->{$key});
            }
        }
        $value->{metadata_edit} = JSON::PP::true;
    }
}

sub check_message {
    my ($m) = @_;
    die "a message must be an object\n" unless ref $m eq 'HASH';
    die "unknown role\n" unless defined $m->{role} && !ref $m->{role} && $ROLES{ $m->{role} };
    my $content = $m->{content};
    die "content must be a string, a list of blocks or null\n"
        if defined $content && ref $content && ref $content ne 'ARRAY';
    # Only Chat Completions and Anthropic messages are read here: refusing the other shapes
    # on the first add keeps the suite from checking this manager in them.
    die "parts (Gemini, GenAI) are not taken here\n" if exists $m->{parts};
    die "every content block needs a type (Bedrock blocks are not taken here)\n"
        if ref $content eq 'ARRAY' && grep { ref $_ ne 'HASH' || !defined $_->{type} } @$content;
    die "a tool message needs tool_call_id\n" if $m->{role} eq 'tool' && !$m->{tool_call_id};
    die "tool_calls must be a list of calls with ids\n"
        if defined $m->{tool_calls} && (ref $m->{tool_calls} ne 'ARRAY'
            || grep { ref $_ ne 'HASH' || !$_->{id} } @{ $m->{tool_calls} });
}

sub calls {    # ids an assistant message calls, in either shape
    my ($m) = @_;
    return () unless $m->{role} eq 'assistant';
    my @ids = map { $_->{id} } @{ $m->{tool_calls} || [] };
    push @ids, map { $_->{id} } grep { ref $_ eq 'HASH' && ($_->{type} // '') eq 'tool_use' }
        @{ ref $m->{content} eq 'ARRAY' ? $m->{content} : [] };
    return @ids;
}

sub results {    # ids a message answers
    my ($m) = @_;
    return ($m->{tool_call_id}) if $m->{role} eq 'tool';
    return map { $_->{tool_use_id} } grep { ref $_ eq 'HASH' && ($_->{type} // '') eq 'tool_result' }
        @{ ref $m->{content} eq 'ARRAY' ? $m->{content} : [] };
}

sub cost { return int(length($JSON->encode($_[0])) / 2) + 8 }    # bytes / 2: on the high side

sub view {    # whole units, newest first, within the budget; system and newest user kept
    my ($history, $budget) = @_;
    my (@units, $i);
    for ($i = 0; $i < @$history;) {
        my %waiting = map { $_ => 1 } calls($history->[$i]);
        my $stop = $i + 1;
        while (%waiting && $stop < @$history && grep { $waiting{$_} } results($history->[$stop])) {
            delete @waiting{ results($history->[$stop]) };
            $stop++;
        }
        my $whole = !%waiting && !($stop == $i + 1 && results($history->[$i]));
        push @units, { ids => [ $i .. $stop - 1 ], whole => $whole };
        $i = $stop;
    }
    my ($newest_user) = reverse grep {
        my $m = $history->[ $units[$_]{ids}[0] ];
        $m->{role} eq 'user' && !results($m)
    } 0 .. $#units;
    my %keep = map { $_ => 1 }
        grep { $history->[ $units[$_]{ids}[0] ]{role} eq 'system' } 0 .. $#units;
    $keep{$newest_user} = 1 if defined $newest_user;
    my $used = 0;
    $used += cost($history->[$_]) for map { @{ $units[$_]{ids} } } keys %keep;
    for my $k (reverse 0 .. $#units) {
        next if $keep{$k} || !$units[$k]{whole};
        my $more = 0;
        $more += cost($history->[$_]) for @{ $units[$k]{ids} };
        last if $used + $more > $budget;
        $keep{$k} = 1;
        $used += $more;
    }
    return [ map { copy_of($history->[$_]) } map { @{ $units[$_]{ids} } } sort { $a <=> $b } keys %keep ];
}

if (@ARGV && $ARGV[0] eq '--self-test') {
    my $file = $ARGV[1] // 'conformance/digest_cases.json';
    open my $in, '<:raw', $file or die "$file: $!\n";
    my $cases = $JSON->decode(do { local $/; <$in> })->{cases};
    my $bad = 0;
    for my $case (@$cases) {
        my $ok = digest($case->{history}, { map { $_ => 1 } @{ $case->{ignore} } }) eq $case->{digest};
        print(($ok ? 'ok' : 'not ok'), " - $case->{name}\n");
        $bad++ unless $ok;
    }
    exit($bad ? 1 : 0);
}

my ($requests_fd, $answers_fd) = split /,/, ($ENV{CTXKIT_PROTOCOL_FDS} // '');
die "CTXKIT_PROTOCOL_FDS must be 'REQUESTS,ANSWERS'; ctxkit conformance starts this program\n"
    unless defined $answers_fd;
open my $requests, '<&=', $requests_fd or die "requests: $!\n";
open my $answers,  '>&=', $answers_fd  or die "answers: $!\n";
$answers->autoflush(1);

my ($token, @history, %ignore, $before, $built);
my %ops;
%ops = (
    reset => sub { @history = (); $built = 1; undef },
    add => sub {
        my ($args) = @_;
        check_message($args->{message});
        push @history, copy_of($args->{message});
        if ($args->{edit_after}) { $before = copy_of(\@history); edit_in_place($args->{message}) }
        undef;
    },
    add_many => sub { $ops{add}->({ message => $_ }) for @{ $_[0]{messages} }; undef },
    view => sub {
        my ($args) = @_;
        my $budget = $args->{token_budget} // 128_000;
        $budget = $args->{provider}{context_window} - ($args->{provider}{max_output_tokens} // 0)
            if ref $args->{provider} eq 'HASH';
        my $view = view(\@history, $budget);
        my $snapshot = copy_of($view);
        if ($args->{edit_after}) { $before = copy_of(\@history); edit_in_place($view) }
        $snapshot;
    },
    get => sub {
        my $stored = copy_of(\@history);
        if ($_[0]{edit_after}) { $before = copy_of(\@history); edit_in_place($stored) }
        copy_of(\@history);
    },
    set => sub {
        my ($args) = @_;
        check_message($_) for @{ $args->{messages} };
        @history = @{ copy_of($args->{messages}) };
        if ($args->{edit_after}) { $before = copy_of(\@history); edit_in_place($args->{messages}) }
        undef;
    },
    clear => sub { @history = (); undef },
);

while (my $line = <$requests>) {
    chomp $line;
    my $request;
    if (!defined $token) {
        $request = $JSON->decode($line);
        $token = $request->{args}{token};
        %ignore = map { $_ => 1 } @{ $request->{args}{ignore} || [] };
        my $value = {
            protocol => 1,
            implementation => { name => 'ctxkit-perl-minimal', version => '1', language => 'perl' },
            target => 'minimal (in-memory unit window)',
            events => JSON::PP::false,
        };
        my $answer = $request->{args}{protocol} == 1
            ? { ok => JSON::PP::true, value => $value }
            : { ok => JSON::PP::false, kind => 'protocol',
                error => { type => 'ProtocolVersion', message => 'speaks protocol 1' } };
        print {$answers} "$token ", $JSON->encode($answer), "\n";
        next;
    }
    unless (index($line, "$token ") == 0) {
        print {$answers} "$token ", $JSON->encode({ ok => JSON::PP::false, kind => 'protocol',
            error => { type => 'Garbage', message => substr($line, 0, 60) } }), "\n";
        next;
    }
    $request = $JSON->decode(substr($line, length($token) + 1));
    my $op = $ops{ $request->{op} };
    undef $before;
    my $answer;
    if (!$op) {
        $answer = { ok => JSON::PP::false, kind => 'protocol',
            error => { type => 'UnknownOp', message => "unknown op $request->{op}" } };
    } else {
        my $value = eval { $op->($request->{args} || {}) };
        $answer = $@
            ? { ok => JSON::PP::false, kind => 'raised', error => { type => 'ValueError', message => "$@" } }
            : { ok => JSON::PP::true, value => $value };
        $answer->{events} = [];
        $answer->{digest} = digest(\@history, \%ignore);
        $answer->{before} = $before if defined $before;
    }
    print {$answers} "$token ", $JSON->encode($answer), "\n";
}
