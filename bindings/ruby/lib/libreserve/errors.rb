# frozen_string_literal: true

module Libreserve
  # Every exception raised for one of the library's codes includes Error,
  # so `rescue Libreserve::Error` catches them all, whatever their class:
  # bad arguments are ArgumentErrors, the rest ReserveErrors.
  #
  #   code       the RSV_E* code (a negative Integer)
  #   code_name  its name, "RSV_EOUTOFSTOCK"
  #   strerror   the library's short text for the code
  #   detail     the library's message for this call (rsv_errmsg)
  module Error
    attr_reader :code, :detail

    def initialize(code, detail = nil)
      @code = code
      @detail = detail.nil? || detail.empty? ? strerror : detail
      super("#{@detail} (#{code_name})")
    end

    def code_name
      Native.rsv_code_name(code) || "RSV_CODE(#{code})"
    end

    def strerror
      Native.rsv_strerror(code)
    end

    # An outcome a checkout handles as business logic (out of stock,
    # already claimed, ...), not a failure.
    def expected?
      is_a?(ExpectedOutcome)
    end
  end

  class ReserveError < StandardError
    include Error
  end

  # Outcomes a checkout handles as business logic.
  class ExpectedOutcome < ReserveError; end
  # Failures: the server, the schema, the connection ...
  class Failure < ReserveError; end

  # A cart line cannot be covered; #failed_line says which (or nil).
  class OutOfStock < ExpectedOutcome
    attr_accessor :failed_line
  end
  class NotFound < ExpectedOutcome; end        # no such checkout
  class Expired < ExpectedOutcome; end         # the hold expired; units given back
  class AlreadyClaimed < ExpectedOutcome; end  # a repeated claim takes nothing
  class AlreadyReleased < ExpectedOutcome; end
  class Busy < ExpectedOutcome; end            # lock conflicts outlasted the retries
  class InDoubt < ExpectedOutcome; end         # outcome unknown: repeat with the same token

  # Not connected, or the connection was lost before COMMIT: nothing was
  # applied.
  class ConnectionError < Failure; end
  # The server refused the account (MariaDB error 1045).
  class AuthenticationError < ConnectionError; end
  class NoItem < Failure; end            # no stock ledger row for the item and location
  class SchemaError < Failure; end
  class SchemaVersionError < Failure; end
  class UnsupportedServer < Failure; end
  class InTransaction < Failure; end
  class OutOfMemory < Failure; end
  class DatabaseError < Failure; end
  class StockError < Failure; end        # the change would go below what is held
  class ConfigError < Failure; end
  class OutOfRange < Failure; end
  class Disabled < Failure; end          # switched off, or the batcher is closing
  class Canceled < Failure; end
  # the server takes no writes (a replica, a Galera node outside the
  # primary component): nothing applied; reconnect and repeat
  class NotPrimary < ConnectionError; end

  # An invalid argument (RSV_EINVAL), refused before anything was sent.
  class InvalidArgument < ArgumentError
    include Error
  end
  class InvalidQuantity < InvalidArgument; end # RSV_EQUANTITY: a quantity or ttl
  class InvalidToken < InvalidArgument; end    # RSV_ETOKEN
  class EmptyCart < InvalidArgument; end       # RSV_EEMPTY
  class CartTooBig < InvalidArgument; end      # RSV_ETOOBIG

  ERRORS = {
    -1 => OutOfStock, -2 => NotFound, -3 => Expired, -4 => AlreadyClaimed,
    -5 => AlreadyReleased, -6 => Busy, -7 => InDoubt, -8 => ConnectionError,
    -10 => InvalidArgument, -11 => InvalidQuantity, -12 => EmptyCart,
    -13 => InvalidToken, -14 => NoItem, -15 => SchemaError,
    -16 => UnsupportedServer, -17 => InTransaction, -18 => OutOfMemory,
    -19 => DatabaseError, -20 => CartTooBig, -21 => StockError,
    -22 => ConfigError, -23 => OutOfRange, -24 => Disabled,
    -25 => SchemaVersionError, -26 => Canceled, -27 => NotPrimary
  }.freeze

  # The exception for a code and the library's message.
  def self.error_for(code, detail = nil)
    klass = ERRORS.fetch(code) { code >= -7 ? ExpectedOutcome : Failure }
    klass = AuthenticationError if klass == ConnectionError && detail.to_s.match?(/\b1045\b|Access denied/)
    klass.new(code, detail)
  end
end
