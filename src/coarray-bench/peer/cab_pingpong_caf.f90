! cab-pingpong-caf: the cab-pingpong protocols in Fortran 2008/2018 coarrays, the
! peer a coarray user knows (GNU Fortran + OpenCoarrays: `caf`, run with `cafrun`).
! A comparison program only: built when `caf` exists, never a dependency of the build.
!
!   put, flag (race-free, default)    put, paper (P002 fig. 2, RACY)   put, atomic (conforming)
!   rmt(1:n)[dest] = loc(1:n)         rmt(1:n)[dest] = loc(1:n)        rmt(1:n)[dest] = loc(1:n)
!   sync memory                       sync memory                      sync memory
!   flag[dest] = seq                  do while (rmt(n) /= flag_up)         call atomic_define(aflag[dest], seq)
!   sync memory                         sync memory                    do; call atomic_ref(v, aflag)
!   do while (flag /= want)           end do                             if (v == want) exit
!     sync memory                     rmt(n) = '1'                     end do; sync memory
!   end do
!   get: loc(1:n) = rmt(1:n)[dest] between `sync all`s (Fortran has no bare barrier).
!
! Timing, checked rounds (alternating payloads, every byte compared) and the JSON
! lines follow cab-pingpong (src/coarray-bench/cab_pingpong.c), so the two compare
! record for record: bench "cab-pingpong-caf", backend "opencoarrays".
!
!   cab-pingpong-caf [--min N] [--max N] [--loop N] [--trials N] [--check-rounds N]
!                    [--ops put,get] [--protocol flag,paper,atomic]
program cab_pingpong_caf
  use, intrinsic :: iso_fortran_env, only: int8, int64, real64, atomic_int_kind, error_unit
  implicit none
  integer, parameter :: p_flag = 1, p_paper = 2, p_atomic = 3
  character(len=6), parameter :: pname(3) = ['flag  ', 'paper ', 'atomic']
  ! bytes as integer(int8): OpenCoarrays 2.9's get of character(len=1) sections with
  ! run-time bounds came back blank-padded here
  integer(int8), parameter :: flag_up = 48_int8, flag_down = 49_int8 ! '0' and '1'
  integer(int8), allocatable :: rmt(:)[:]
  integer(int64), volatile :: flag[*]
  integer(atomic_int_kind) :: aflag[*]
  integer(int8), allocatable :: loc(:), alt(:, :)
  integer(int64) :: nmin = 1, nmax = 4194304, loop = 1000, trials = 1, check_rounds = -1
  integer(int64) :: sent, recvd, torn, size
  ! watchdog, as in cab-pingpong: the paper protocol's race can deadlock it
  real(real64) :: hang_timeout = 10
  integer :: hung
  logical :: want_put = .true., want_get = .true., proto_on(3) = [.true., .false., .false.]
  integer :: me, dest, p, all_ok
  character(len=256) :: arg, val

  call parse_args()
  if (check_rounds < 0) check_rounds = loop
  me = this_image()
  if (num_images() < 2) then
    if (me == 1) write (error_unit, '(a)') 'cab-pingpong-caf: error: needs at least 2 images'
    error stop 2
  end if
  dest = 3 - me
  allocate (rmt(nmax)[*], loc(nmax), alt(nmax, 0:1))
  all_ok = 1
  if (want_put) then
    do p = 1, 3
      if (.not. proto_on(p)) cycle
      size = nmin
      do while (size <= nmax)
        call measure_put(p, size)
        size = size*2
      end do
    end do
  end if
  if (want_get) then
    size = nmin
    do while (size <= nmax)
      call measure_get(size)
      size = size*2
    end do
  end if
  sync all
  if (all_ok == 0) then
    if (me == 1) write (error_unit, '(a)') 'cab-pingpong-caf: data verification FAILED'
    error stop 1
  end if

contains

  pure integer(int8) function pat(i, n, a, paper)
    integer(int64), intent(in) :: i, n ! i is 1-based
    integer, intent(in) :: a
    logical, intent(in) :: paper
    if (paper .and. i == n) then
      pat = flag_up
    else
      pat = int(97 + mod(i - 1 + a*13, 26_int64), int8)
    end if
  end function

  subroutine prepare(p, n, put)
    integer, intent(in) :: p
    integer(int64), intent(in) :: n
    logical, intent(in) :: put
    integer(int64) :: i
    do i = 1, n
      if (put) then
        rmt(i) = flag_down
        loc(i) = pat(i, n, 0, p == p_paper)
      else
        rmt(i) = pat(i, n, 0, .false.)
        loc(i) = 0
      end if
      alt(i, 0) = pat(i, n, 0, p == p_paper)
      alt(i, 1) = pat(i, n, 1, p == p_paper)
    end do
    flag = 0
    call atomic_define(aflag, 0)
    sent = 0
    recvd = 0
    sync all
  end subroutine

  subroutine send(p, n, a, check)
    integer, intent(in) :: p, a
    integer(int64), intent(in) :: n
    logical, intent(in) :: check
    sent = sent + 1
    if (check) then
      rmt(1:n)[dest] = alt(1:n, a)
    else
      rmt(1:n)[dest] = loc(1:n)
    end if
    sync memory
    if (p == p_flag) then
      flag[dest] = sent
      sync memory
    else if (p == p_atomic) then
      call atomic_define(aflag[dest], int(sent, atomic_int_kind))
    end if
  end subroutine

  subroutine receive(p, n, a, check)
    integer, intent(in) :: p, a
    integer(int64), intent(in) :: n
    logical, intent(in) :: check
    integer(atomic_int_kind) :: v
    integer(int64) :: last, polls
    real(real64) :: since
    recvd = recvd + 1
    polls = 0
    since = 0
    select case (p)
    case (p_paper)
      do while (rmt(n) /= flag_up)
        sync memory
        if (timed_out(polls, since)) return
      end do
    case (p_flag)
      do while (flag /= recvd)
        sync memory
        if (timed_out(polls, since)) return
      end do
    case default
      do
        call atomic_ref(v, aflag)
        if (v == recvd) exit
        if (timed_out(polls, since)) return
      end do
      sync memory
    end select
    if (check) then
      last = n
      if (p == p_paper) last = n - 1
      if (any(rmt(1:last) /= alt(1:last, a))) torn = torn + 1
    end if
    if (p == p_paper) rmt(n) = flag_down
  end subroutine

  ! one message waited for longer than hang_timeout (clock read every 1024 polls only)
  logical function timed_out(polls, since)
    integer(int64), intent(inout) :: polls
    real(real64), intent(inout) :: since
    real(real64) :: t
    polls = polls + 1
    timed_out = .false.
    if (mod(polls, 1024_int64) /= 0) return
    t = now()
    if (since == 0) since = t
    if (t - since < hang_timeout) return
    hung = 1
    timed_out = .true.
  end function

  real(real64) function now()
    integer(int64) :: c, rate
    call system_clock(c, rate)
    now = real(c, real64)/real(rate, real64)
  end function

  ! collective: did any image give up waiting?
  logical function any_hung()
    integer :: h
    h = hung
    call co_max(h)
    sync all
    any_hung = h > 0
  end function

  subroutine rounds(p, n, count, check)
    integer, intent(in) :: p
    integer(int64), intent(in) :: n, count
    logical, intent(in) :: check
    integer(int64) :: i
    integer :: a
    do i = 1, count
      if (hung /= 0) exit
      a = int(mod(i - 1, 2_int64))
      if (me == 1) then
        call send(p, n, a, check)
        call receive(p, n, a, check)
      else if (me == 2) then
        call receive(p, n, a, check)
        if (hung == 0) call send(p, n, a, check)
      end if
    end do
  end subroutine

  subroutine measure_put(p, n)
    integer, intent(in) :: p
    integer(int64), intent(in) :: n
    real(real64) :: best, half
    integer(int64) :: t, c0, c1, rate, i, last, bad, torn_all
    logical :: ok, h
    hung = 0
    call prepare(p, n, .true.)
    call rounds(p, n, min(loop, 10_int64), .false.)
    h = any_hung()
    best = huge(1.0_real64)
    do t = 1, trials
      if (h) exit
      sync all
      call system_clock(c0, rate)
      call rounds(p, n, loop, .false.)
      call system_clock(c1)
      best = min(best, real(c1 - c0, real64)/real(rate, real64))
      h = any_hung()
    end do
    bad = 0
    if (me <= 2 .and. .not. h) then
      last = n
      if (p == p_paper) last = n - 1
      do i = 1, last
        if (rmt(i) /= pat(i, n, 0, p == p_paper)) bad = 1
      end do
    end if
    torn = 0
    if (check_rounds > 0 .and. .not. h) then
      call prepare(p, n, .true.)
      call rounds(p, n, check_rounds, .true.)
      h = any_hung()
    end if
    if (h) then ! the paper protocol's race can deadlock it; a race-free one must not
      if (p /= p_paper) all_ok = 0
      if (me == 1) write (*, '(a,i0,a)') '{"bench":"cab-pingpong-caf","metric":"hung","value":1,'// &
        '"unit":"runs","op":"'//put_op(p)//'","protocol":"'//trim(pname(p))//'","bytes":', n, &
        ',"racy":'//trim(merge('true ', 'false', p == p_paper))//'}'
      return
    end if
    torn_all = torn
    call co_sum(bad)
    call co_sum(torn_all)
    half = best/(2.0_real64*real(loop, real64))
    call co_max(half)
    ok = bad == 0 .and. (p == p_paper .or. torn_all == 0)
    if (.not. ok) all_ok = 0
    if (me == 1) then
      call emit('latency', half*1e6_real64, 'us', put_op(p), trim(pname(p)), n, ok, torn_all)
      call emit('bandwidth', real(n, real64)/half/1e6_real64, 'MB/s', put_op(p), trim(pname(p)), &
                n, ok, torn_all)
    end if
  end subroutine

  function put_op(p) result(op)
    integer, intent(in) :: p
    character(len=:), allocatable :: op
    if (p == p_flag) then
      op = 'put'
    else
      op = 'put-'//trim(pname(p))
    end if
  end function

  subroutine measure_get(n)
    integer(int64), intent(in) :: n
    real(real64) :: best, half
    integer(int64) :: t, c0, c1, rate, i, j, bad
    logical :: ok
    call prepare(p_flag, n, .false.)
    best = huge(1.0_real64)
    do t = 0, trials
      sync all
      call system_clock(c0, rate)
      do i = 1, merge(min(loop, 10_int64), loop, t == 0) ! t = 0: warm-up
        if (me == 1) then
          loc(1:n) = rmt(1:n)[dest]
          sync all
        else
          sync all
          if (me == 2) loc(1:n) = rmt(1:n)[dest]
        end if
        sync all
      end do
      call system_clock(c1)
      if (t > 0) best = min(best, real(c1 - c0, real64)/real(rate, real64))
    end do
    bad = 0
    if (me <= 2) then
      do j = 1, n
        if (loc(j) /= pat(j, n, 0, .false.)) bad = 1
      end do
    end if
    call co_sum(bad)
    half = best/(2.0_real64*real(loop, real64))
    call co_max(half)
    ok = bad == 0
    if (.not. ok) all_ok = 0
    if (me == 1) then
      call emit('latency', half*1e6_real64, 'us', 'get', 'barrier', n, ok, -1_int64)
      call emit('bandwidth', real(n, real64)/half/1e6_real64, 'MB/s', 'get', 'barrier', n, ok, -1_int64)
    end if
  end subroutine

  subroutine emit(metric, value, unit, op, protocol, n, ok, torn_all)
    character(len=*), intent(in) :: metric, unit, op, protocol
    real(real64), intent(in) :: value
    integer(int64), intent(in) :: n, torn_all
    logical, intent(in) :: ok
    character(len=64) :: v, extra
    character(len=160) :: params
    write (v, '(es17.10)') value
    extra = ''
    if (torn_all >= 0 .and. check_rounds > 0) &
      write (extra, '(a,i0,a,i0)') ',"torn_rounds":', torn_all, ',"checked_rounds":', check_rounds
    write (params, '(a,i0,a,i0,a,i0,a)') ',"params":{"backend":"opencoarrays","images":', &
      num_images(), ',"loop":', loop, ',"trials":', trials, '}}'
    write (*, '(a,i0,a)') '{"bench":"cab-pingpong-caf","metric":"'//metric//'","value":'// &
      trim(adjustl(v))//',"unit":"'//unit//'","op":"'//op//'","protocol":"'//protocol// &
      '","bytes":', n, ',"verified":'//trim(merge('true ', 'false', ok))//trim(extra)//trim(params)
    flush (6)
  end subroutine

  integer(int64) function to_size(s)
    character(len=*), intent(in) :: s
    integer :: l, ios
    integer(int64) :: mult
    l = len_trim(s)
    mult = 1
    if (l > 0) then
      select case (s(l:l))
      case ('K', 'k'); mult = 1024; l = l - 1
      case ('M', 'm'); mult = 1024**2; l = l - 1
      end select
    end if
    read (s(1:l), *, iostat=ios) to_size
    if (ios /= 0 .or. l < 1) call usage('not a number: '//trim(s))
    to_size = to_size*mult
  end function

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    if (this_image() == 1) write (error_unit, '(a)') 'cab-pingpong-caf: error: '//msg
    error stop 2
  end subroutine

  subroutine parse_args()
    integer :: i, n
    i = 1
    n = command_argument_count()
    do while (i <= n)
      call get_command_argument(i, arg)
      if (i + 1 > n) call usage('option '//trim(arg)//' needs a value')
      call get_command_argument(i + 1, val)
      select case (trim(arg))
      case ('--min'); nmin = to_size(val)
      case ('--max'); nmax = to_size(val)
      case ('--loop'); loop = to_size(val)
      case ('--trials'); trials = to_size(val)
      case ('--check-rounds'); check_rounds = to_size(val)
      case ('--hang-timeout'); hang_timeout = real(to_size(val), real64)
      case ('--ops')
        want_put = index(val, 'put') > 0
        want_get = index(val, 'get') > 0
      case ('--protocol')
        proto_on = [index(val, 'flag') > 0, index(val, 'paper') > 0, index(val, 'atomic') > 0]
        if (.not. any(proto_on)) call usage('--protocol: flag, paper or atomic')
      case default
        call usage('unknown option '//trim(arg))
      end select
      i = i + 2
    end do
    if (nmin < 1 .or. nmax < nmin .or. loop < 1 .or. trials < 1) call usage('bad sizes or counts')
  end subroutine
end program
