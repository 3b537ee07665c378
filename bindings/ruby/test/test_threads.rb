# frozen_string_literal: true

# Threads: a call waiting for the server releases the GVL, and a Batcher
# is shared by many threads.

require_relative "helper"

class TestThreads < Minitest::Test
  def setup
    @item = Items.next
  end

  # A claim waits for a row lock that only this thread can release: were
  # the GVL kept during the call, this thread could not run, and the
  # claim would end Busy after its time budget instead of succeeding.
  def test_waiting_call_releases_the_gvl
    Libreserve.open(TestDB.dsn, call_timeout_ms: 20_000, lock_wait_timeout_s: 15) do |ctx|
      ctx.stock_set(8, item_id: @item, location_id: 1, on_hand: 5)
      ctx.reserve_one(8, "gvl-1", item_id: @item, location_id: 1, quantity: 2)
      locker = TestDB::Session.new
      locker.run("START TRANSACTION; SELECT status FROM rsv_checkouts " \
                 "WHERE shop_id = 8 AND checkout_token = 'gvl-1' FOR UPDATE")
      claim = Thread.new { ctx.claim(8, "gvl-1") }
      waited = 0.step.find do |i|
        flunk "the claim never waited for the lock" if i > 3000
        sleep 0.01
        TestDB.sql("SELECT COUNT(*) FROM information_schema.innodb_trx t " \
                   "JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id " \
                   "WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()") != "0"
      end
      refute_nil waited
      locker.close
      assert claim.value
      assert_equal 3, ctx.stock(8, item_id: @item, location_id: 1).on_hand
    end
  end

  def test_batcher_shared_by_threads
    Libreserve.open(TestDB.dsn) { |c| c.stock_set(9, item_id: @item, location_id: 1, on_hand: 20) }
    Libreserve::Batcher.open(TestDB.dsn, connections: 3) do |b|
      outcomes = Array.new(32) do |i|
        Thread.new do
          token = "batcher-#{i}"
          b.reserve_one(9, token, item_id: @item, location_id: 1, quantity: 1)
          b.claim(9, token)
          assert_raises(Libreserve::AlreadyClaimed) { b.claim(9, token) }
          :sold
        rescue Libreserve::OutOfStock
          :out_of_stock
        end
      end.map(&:value)
      assert_equal({ sold: 20, out_of_stock: 12 }, outcomes.tally)
      assert_equal 32, b.stats(:reserve)[:calls]
      assert_match(/libreserve_calls_total\{instance="t",op="reserve",result="ok",class="ok"\} 20/, b.prometheus('instance="t"'))
      assert_raises(Libreserve::InvalidToken) { b.claim(9, "") }
      assert_raises(TypeError) { b.claim(9, 42) }
      assert_raises(Libreserve::NotFound) { b.release(9, "never-reserved") }
      # a cart through the batcher
      Libreserve.open(TestDB.dsn) { |c| c.stock_set(9, item_id: @item + 1, location_id: 1, on_hand: 3) }
      lines = [{ item_id: @item + 1, locations: [1], quantity: 2 }]
      alloc = b.reserve(9, "batcher-cart-1", lines)
      assert_equal [[1, 2]], alloc[0].map { |a| [a.location_id, a.quantity] }
      err = assert_raises(Libreserve::OutOfStock) { b.reserve(9, "batcher-cart-2", lines) }
      assert_equal 0, err.failed_line
    end
    Libreserve.open(TestDB.dsn) do |c|
      assert_equal 0, c.stock(9, item_id: @item, location_id: 1).on_hand
      assert_empty c.audit(9)
    end
  end

  # A context and a batcher inherited by a forked child refuse to work
  # there, and the child's exit does not end the parent's session.
  def test_fork
    Libreserve.open(TestDB.dsn) do |ctx|
      ctx.stock_set(11, item_id: @item, location_id: 1, on_hand: 5)
      Libreserve::Batcher.open(TestDB.dsn, connections: 1) do |b|
        r, w = IO.pipe
        pid = fork do
          r.close
          said = [-> { ctx.stock(11, item_id: @item, location_id: 1) }, -> { b.claim(11, "x") }].map do |call|
            call.call
            "ran"
          rescue IOError => e
            e.message[/before a fork/] || e.message
          end
          ctx.close
          b.close
          w.puts said.join("|")
          w.close
          GC.start
        end
        w.close
        said = r.read
        Process.wait(pid)
        assert_equal "before a fork|before a fork\n", said
        assert_equal 5, ctx.stock(11, item_id: @item, location_id: 1).on_hand
        b.reserve_one(11, "after-fork", item_id: @item, location_id: 1, quantity: 1)
      end
    end
  end

  def test_closed_batcher
    b = Libreserve::Batcher.new(TestDB.dsn, connections: 1)
    b.close
    assert b.closed?
    assert_raises(IOError) { b.claim(9, "x") }
    b.close
  end
end
